"""Which variables a save writes, the file each one goes to, and where a load puts its value:
what save / load (spmd/io/__init__.py) and the program-state dicts (spmd/io/state.py) share.

Both modules import this one and it imports neither, so state.py needs nothing of the package
it is part of; spmd.io re-exports the public names (fluid.io.is_parameter, var_path, ...).
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..core.places import array_module
from ..core.program import Program, default_main_program
from ..core.scope import global_scope
from ..core.variable import Parameter, Variable
from ..errors import ArgumentTypeError, InvalidArgumentError, PreconditionError
from .reading import Header, is_file_below

NOT_SAVED_TYPES = frozenset({"FEED_MINIBATCH", "FETCH_LIST", "READER", "RAW"})


def is_parameter(var: Variable) -> bool:
    """True for Parameters (weights, biases): what save_params writes."""
    return isinstance(var, Parameter)


def is_persistable(var: Variable) -> bool:
    """True for variables kept in the scope between runs: what save_persistables writes."""
    return var.persistable and var.type not in NOT_SAVED_TYPES


def is_belong_to_optimizer(var: Variable) -> bool:
    """Persistables that are not parameters nor data (learning rates, moments, counters)."""
    return is_persistable(var) and not is_parameter(var) and not var.is_data


def as_program(program, who: str) -> Program:
    """The Program a save or load of `who` works on: the default main program for None, a
    CompiledProgram's own program (fluid's warning). Raises ArgumentTypeError."""
    if program is None:
        return default_main_program()
    inner = getattr(program, "_program", None)  # a CompiledProgram saves its program
    if isinstance(inner, Program):
        # fluid's warning, where passing it changes nothing; a Reduce-mode CompiledProgram
        # that split the optimizer state is what gathers that state, so it is not warned of
        shards = getattr(program, "optimizer_state_sharding", lambda: None)()
        if shards is None:
            warnings.warn("The input is a CompiledProgram, this is not recommended.",
                          stacklevel=3)
        program = inner
    if not isinstance(program, Program):
        raise ArgumentTypeError(  # a TypeError, as fluid's
            f"{who}: main_program must be a Program, got {type(program).__name__}")
    return program


def var_file(dirname: str, name: str) -> str:
    """`<name>.npy`, the file of variable `name` in `dirname`; a name with '/' is a file of a
    subfolder, as fluid saves it ('GRUCell/BasicGRUUnit_0.w_0' -> GRUCell/BasicGRUUnit_0.w_0.npy
    in `dirname`)."""
    if not is_file_below(name):
        raise InvalidArgumentError(
            f"variable name {name!r} cannot be used as a file name in '{dirname}' (a name "
            f"may hold '/' between plain parts, never an empty part, '.' or '..'); save with "
            f"filename='...' to put every variable in one file"
        )
    return name + ".npy"


def var_path(dirname: str, name: str) -> str:
    """Where save_vars (without filename=) puts variable `name` under `dirname`."""
    return os.path.join(dirname, var_file(dirname, name))


def model_prefix(model_path) -> str:
    """paddle 2.x's `dirname/filename` of fluid.save / load, without a .pdparams, .pdopt or
    .pdmodel suffix given."""
    model_path = os.fspath(model_path)
    for suffix in (".pdparams", ".pdopt", ".pdmodel"):
        if model_path.endswith(suffix):
            model_path = model_path[: -len(suffix)]
    if not os.path.basename(model_path):
        raise InvalidArgumentError(
            f"model_path must be 'dirname/filename', got {model_path!r} (the filename is empty)")
    return model_path


def check_matches(var: Variable, header: Header):
    """Before anything is read: the file holds what the program declares."""
    got_shape, got_dtype, path = header.shape, header.dtype.name, header.path
    want = var.shape
    shape_ok = not want or (len(want) == len(got_shape) and all(
        w < 0 or w == g for w, g in zip(want, got_shape)))
    if shape_ok and got_dtype == var.dtype:
        return
    shown = "[" + ", ".join("None" if d < 0 else str(d) for d in want) + "]"
    raise InvalidArgumentError(
        f"variable '{var.name}' loaded from '{path}' has shape {list(got_shape)} and dtype "
        f"{got_dtype}, but the program declares shape {shown} and dtype {var.dtype}; the "
        f"file was saved from a different model (or another version of it)"
    )


def placer(executor, scope, name: str):
    """numpy or cupy `asarray`: the executor's place, else where the current value lives."""
    if executor is not None and getattr(executor, "place", None) is not None:
        return array_module(executor.place).asarray
    current = scope.get(name)
    if current is not None and not isinstance(current, np.ndarray):
        import cupy

        return cupy.asarray
    return np.asarray


def split_state(scope, executor=None, program=None):
    """The StateSharding whose Reduce-mode optimizer state `scope` holds split across the
    ranks, asked of the jobs that ran on it: `executor`'s (Executor.state_sharding), or those
    of a data-parallel CompiledProgram given; None when neither split it."""
    shards = getattr(program, "optimizer_state_sharding", lambda: None)()
    if shards is not None and shards[0] is scope:
        return shards[1]
    ask = getattr(executor, "state_sharding", None)
    return ask(scope) if callable(ask) else None


def rank_tag() -> str:
    """`[rank r/n] ` in a job of several ranks, for the errors of a save or load; else ''."""
    from ..comm.topology import detect

    topology = detect()
    return f"{topology.tag()} " if topology.size > 1 else ""


def refuse_sharded(vars: list[Variable], executor=None, program=None):
    """Loading state a Reduce-mode program has split would leave the split copies stale."""
    sharding = split_state(global_scope(), executor, program)
    owners = sharding.owners() if sharding is not None else {}
    sharded = [v.name for v in vars if v.name in owners]
    if sharded:
        raise PreconditionError(
            f"{rank_tag()}cannot load {sharded[:3]}{'...' if len(sharded) > 3 else ''}: a "
            f"Reduce-mode data-parallel program has already split this optimizer state across "
            f"the ranks in this scope. Load a checkpoint before the program's first run: run "
            f"the startup program into a fresh scope, load, then run the CompiledProgram")
