"""Save and load variables, inference models and checkpoints, in numpy's formats, never pickle.

One `<name>.npy` file per variable, or with `filename=` all of them in one `.npz`-format file;
programs as JSON. Loading refuses pickled data (a pickle can run code when it is read). A save
is atomic: a kill at any instant leaves the previous checkpoint or the new one, complete (see
spmd/io/files.py: temporaries, a journal, a manifest, why that design); every load checks every
file's header, size and manifest entry before allocating (spmd/io/reading.py) and reads and
checks all values before it changes the scope. A saved model as a {name: array} dict, for
loading pretrained weights into another program: spmd/io/state.py.

    >>> import spmd.io
    >>> # spmd.io.save_persistables(exe, "ckpt")            # ckpt/fc_0.w_0.npy, ...
    >>> # spmd.io.load_persistables(exe, "ckpt", main_program)
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

from ..core.operator import OpRole
from ..core.program import Program, default_main_program
from ..core.scope import global_scope, host_array
from ..core.variable import Variable
from ..errors import InvalidArgumentError, NotFoundError, PreconditionError
from ..executor.feed_fetch_ops import add_feed_fetch_ops, feed_fetch_names
from ..passes.prune import prune
from .files import AtomicFiles, npz_bytes, npz_writer, reading, text_writer, write_array
from .fluid_model import is_fluid_model, program_from_fluid, read_combined, read_fluid_vars
from .reading import inspect_npy, inspect_npz, read_arrays, read_npz_bytes, read_text
from .state import (
    get_program_parameter,
    get_program_persistable_vars,
    load_program_state,
    set_program_state,
)
from .variables import (
    as_program,
    check_matches,
    is_belong_to_optimizer,
    is_parameter,
    is_persistable,
    model_prefix,
    placer,
    rank_tag,
    refuse_sharded,
    split_state,
    var_file,
    var_path,  # noqa: F401 - spmd.io.var_path, for fleet and lookup_table_utils
)

_rank_tag = rank_tag  # spmd.fleet.checkpoint's name for it

__all__ = [
    "get_program_parameter", "get_program_persistable_vars", "is_belong_to_optimizer",
    "is_parameter", "is_persistable", "load", "load_inference_model", "load_params",
    "load_persistables", "load_program_state", "load_vars", "save", "save_inference_model",
    "save_params", "save_persistables", "save_vars", "set_program_state",
]

MODEL_FILENAME = "__model__"


# -- variables, scope --------------------------------------------------------------------------


def _select_vars(main_program, vars, predicate, who: str) -> list[Variable]:
    program = as_program(main_program, who)
    if vars is None:
        chosen = [v for v in program.list_vars() if predicate is None or predicate(v)]
    else:
        items = [vars] if isinstance(vars, (Variable, str)) else list(vars)
        chosen = [program.global_block().var(v) if isinstance(v, str) else v for v in items]
        bad = [v for v in chosen if not isinstance(v, Variable)]
        if bad:
            raise InvalidArgumentError(
                f"{who}: vars must be Variables or names, got {type(bad[0]).__name__}")
    unique = {}
    for v in chosen:
        unique.setdefault(v.name, v)
    return list(unique.values())


def _gather(vars: list[Variable], main_program=None, executor=None) -> dict:
    """Every variable's value from the global scope, as host arrays; raises before any write.

    Given a Reduce-mode data-parallel CompiledProgram, the optimizer state it split across the
    ranks is assembled whole first: a collective, so every rank must save."""
    scope, arrays = global_scope(), {}
    shards = getattr(main_program, "optimizer_state_sharding", lambda: None)()
    if shards is not None:
        ran_on, sharding = shards
        if scope is not ran_on:
            raise InvalidArgumentError(
                f"{rank_tag()}the data-parallel program ran on another scope than the global "
                f"scope this save reads; save inside fluid.scope_guard(<the scope of exe.run>)")
        arrays.update(sharding.gather([v.name for v in vars]))
    not_yet = _schedule_outputs(getattr(main_program, "_program", main_program))
    for var in vars:
        if var.name in arrays:
            continue
        value = scope.get(var.name)
        if value is None and var.name in not_yet:
            continue  # fluid holds it as a temporary of the main program and saves nothing
        if value is None:
            raise _missing_error(split_state(scope, executor, main_program), var.name,
                                 _state_of_trained_parameter(main_program, scope, var.name))
        arrays[var.name] = host_array(value)
    return arrays


def _schedule_outputs(program) -> set[str]:
    """Variables a learning-rate schedule of `program` computes each step (exponential_decay
    and its kin: no startup op, as fluid's). spmd keeps them persistable, for
    optimizer.get_lr() after a run; before the first run they have no value to save."""
    if not isinstance(program, Program):
        return set()
    return {n for op in program.global_block().ops if op.role is OpRole.LR_SCHED
            for n in op.output_arg_names}


def _missing_error(sharding, name: str, parameter: str | None = None) -> Exception:
    owners = sharding.owners().get(name) if sharding is not None else None
    if owners is not None:
        return PreconditionError(
            f"{rank_tag()}cannot save '{name}': ReduceStrategy.Reduce keeps this optimizer "
            f"state on rank(s) {owners} only. Pass the data-parallel CompiledProgram as "
            f"main_program and call the save on every rank (it assembles the state from its "
            f"owners, a collective); every rank that saves writes the whole checkpoint")
    tag = rank_tag()
    if parameter is not None:  # its parameter has a value: the startup program ran
        return PreconditionError(
            f"{tag}cannot save '{name}' (optimizer state of {parameter!r}): it has no value in "
            f"the scope. If a data-parallel CompiledProgram with ReduceStrategy.Reduce "
            f"trained it, each place holds only the state it owns: pass that CompiledProgram as "
            f"main_program (or give the save its executor) and call the save on every rank")
    return PreconditionError(
        f"{tag}cannot save variable '{name}': it has no value in the scope; run the startup "
        f"program (exe.run(fluid.default_startup_program())) first")


def _state_of_trained_parameter(program, scope, name: str) -> str | None:
    """The parameter whose optimizer state `name` is, when that parameter has a value in
    `scope` (so the startup program ran); else None."""
    state = getattr(getattr(program, "_program", program), "optimizer_state", None) or {}
    for parameter, names in state.items():
        if name in names and scope.get(parameter) is not None:
            return parameter
    return None


def _read_checked(vars: list[Variable], headers: dict, into: dict | None = None) -> dict:
    for var in vars:
        check_matches(var, headers[var.name])
    return read_arrays([headers[v.name] for v in vars], into)


# A variable this large is loaded straight into the array the scope holds for it, when that
# array fits and nothing else holds it: a checkpoint loaded over a trained table (or the one
# the startup program made) then never holds two copies of the table (reading.read_arrays)
LOAD_IN_PLACE_MIN = 1 << 24


def _count_alone() -> int:
    """sys.getrefcount of an array only a Scope and one local name hold (calibrated)."""
    from ..core.scope import Scope

    probe = Scope()
    probe.put("x", np.empty(1))
    a = probe.get("x")
    return sys.getrefcount(a)


_ALONE = _count_alone()


def _in_place_targets(executor, vars: list[Variable]) -> dict:
    """{name: the scope's array} for the large host arrays a load may read into: owning their
    memory, writable, C-contiguous, and held by the scope alone (an array a user took with
    np.asarray(scope.find_var(name).get_tensor()) keeps its values: it gets a new one)."""
    scope, targets = global_scope(), {}
    for var in vars:
        a = scope.get(var.name)
        if (type(a) is not np.ndarray or a.base is not None or a.nbytes < LOAD_IN_PLACE_MIN
                or not (a.flags.c_contiguous and a.flags.writeable)
                or placer(executor, scope, var.name) is not np.asarray):
            continue
        if sys.getrefcount(a) == _ALONE:
            targets[var.name] = a
    return targets


def _store(executor, vars: list[Variable], arrays: dict):
    """Place every array, then assign all: a failure leaves the scope untouched."""
    scope = global_scope()
    placed = {v.name: placer(executor, scope, v.name)(arrays[v.name]) for v in vars}
    for name, array in placed.items():
        scope._assign(name, array)


def _stage_vars(files: AtomicFiles, arrays: dict, filename: str | None):
    if filename is None:
        for name, array in arrays.items():
            files.write(var_file(files.directory, name), lambda f, a=array: write_array(f, a))
    else:
        files.write(filename, npz_writer(arrays))


def _read_vars(dirname: str, vars: list[Variable], filename: str | None,
               into: dict | None = None) -> dict:
    """The arrays of `vars` saved in `dirname`, per file or in the archive `filename`; every
    file checked (header, size, manifest, the program's shape and dtype) before any is read."""
    with reading(dirname) as manifest:  # an interrupted save is finished first
        if filename is not None:
            headers = inspect_npz(os.path.join(dirname, filename), [v.name for v in vars],
                                  manifest.get(filename))
        else:
            files = {v.name: var_file(dirname, v.name) for v in vars}
            headers = {n: inspect_npy(os.path.join(dirname, f), n, manifest.get(f))
                       for n, f in files.items()}
        return _read_checked(vars, headers, into)


def _check_dirname(dirname, who: str):
    if not isinstance(dirname, (str, os.PathLike)) or not str(dirname):
        raise InvalidArgumentError(f"{who}: dirname must be a directory path, got {dirname!r}")
    return os.fspath(dirname)


# -- fluid 1.x ---------------------------------------------------------------------------------
# fluid 1.8's words (programs and Paddle's tests compare them)
NO_VARIABLE_WARNING = ("no variable in your model, please ensure there are any variables in "
                       "your model to save")
AUC_WARNING = ("please ensure that you have set the auc states to zeros before saving "
               "inference model")
PROGRAM_ONLY_WARNING = ("save_inference_model specified the param `program_only` to True, It "
                        "will not save params of Program.")


def save_vars(executor, dirname: str | None, main_program: Program | None = None, vars=None,
              predicate=None, filename: str | None = None) -> bytes | None:
    """Save `vars` (or the variables of `main_program` for which `predicate` is true) from the
    global scope: `dirname/<name>.npy` each, or all in `dirname/filename` (.npz format).

    With dirname=None and no filename nothing is written: the bytes of that one file are
    returned, as fluid 1.8 saves "to memory" (load_vars / load_inference_model take them with
    dirname=None).

    >>> # save_vars(exe, "model", prog, predicate=lambda v: v.persistable)
    """
    selected = _select_vars(main_program, vars, predicate, "save_vars")
    if not selected:  # as fluid 1.8: nothing is written
        warnings.warn(NO_VARIABLE_WARNING, stacklevel=2)
        return None
    if dirname is None and filename is None:  # fluid's save to memory
        return npz_bytes(_gather(selected, main_program, executor))
    dirname = _check_dirname(dirname, "save_vars")
    arrays = _gather(selected, main_program, executor)
    if filename:  # fluid joins them: the file may lie in a subdirectory
        dirname, filename = os.path.split(os.path.join(dirname, filename))
    os.makedirs(dirname, exist_ok=True)
    with AtomicFiles(dirname) as files:
        _stage_vars(files, arrays, filename)


def load_vars(executor, dirname: str, main_program: Program | None = None, vars=None,
              predicate=None, filename: str | None = None) -> None:
    """Load what save_vars wrote into the global scope, on `executor`'s place. Shapes and
    dtypes must match the program's variables; nothing is assigned unless everything loads.

    With dirname=None, `filename` is the bytes save_vars(executor, None, ...) returned.

    >>> # load_vars(exe, "model", prog, predicate=lambda v: v.persistable)
    """
    if dirname is None:  # fluid's load from memory
        selected = _select_vars(main_program, vars, predicate, "load_vars")
        refuse_sharded(selected, executor, main_program)
        by_name = {v.name: v for v in selected}
        arrays = read_npz_bytes(filename, list(by_name),
                                lambda h: check_matches(by_name[h.name], h))
        _store(executor, selected, arrays)
        return
    dirname = _check_dirname(dirname, "load_vars")
    selected = _select_vars(main_program, vars, predicate, "load_vars")
    refuse_sharded(selected, executor, main_program)
    if filename:
        dirname, filename = os.path.split(os.path.join(dirname, filename))
    else:  # a schedule's rate saved before any run (or by fluid, a temporary there) has no file
        not_yet = _schedule_outputs(getattr(main_program, "_program", main_program)
                                    or default_main_program())
        selected = [v for v in selected if v.name not in not_yet
                    or os.path.exists(os.path.join(dirname, f"{v.name}.npy"))]
    _store(executor, selected, _read_vars(dirname, selected, filename,
                                          _in_place_targets(executor, selected)))


def save_params(executor, dirname: str | None, main_program: Program | None = None,
                filename: str | None = None) -> bytes | None:
    """Save every Parameter of `main_program` (see save_vars)."""
    return save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_params(executor, dirname: str, main_program: Program | None = None,
                filename: str | None = None) -> None:
    """Load every Parameter of `main_program` (see load_vars)."""
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor, dirname: str | None, main_program: Program | None = None,
                      filename: str | None = None) -> bytes | None:
    """Save every persistable variable (parameters, optimizer state, counters): a checkpoint
    (dirname=None: returned as bytes, see save_vars)."""
    return save_vars(executor, dirname, main_program, predicate=is_persistable,
                     filename=filename)


def load_persistables(executor, dirname: str, main_program: Program | None = None,
                      filename: str | None = None) -> None:
    """Load every persistable variable of `main_program` (see load_vars)."""
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


# -- inference models --------------------------------------------------------------------------
def _name_list(items, what: str, allowed=(str,)) -> list[str]:
    items = [items] if isinstance(items, (str, Variable)) else list(items or [])
    names = []
    for item in items:
        if not isinstance(item, allowed):
            raise InvalidArgumentError(
                f"save_inference_model: {what} must hold "
                f"{' or '.join(t.__name__ for t in allowed)}, got {type(item).__name__}")
        names.append(item.name if isinstance(item, Variable) else item)
    if not names:
        raise InvalidArgumentError(f"save_inference_model: {what} is empty")
    return names


def save_inference_model(dirname: str, feeded_var_names, target_vars, executor,
                         main_program: Program | None = None, model_filename: str | None = None,
                         params_filename: str | None = None, export_for_deployment: bool = True,
                         program_only: bool = False) -> list[str]:
    """Save the forward ops computing `target_vars` from `feeded_var_names` (the program cloned
    for test, then pruned) as JSON in `dirname/__model__` (or model_filename), with the feed and
    fetch names, and the persistables they read. Returns the target names.

    >>> # save_inference_model("infer", ["img"], [predict], exe)
    >>> # program, feed_names, fetch_vars = load_inference_model("infer", exe)
    """
    dirname = _check_dirname(dirname, "save_inference_model")
    program = as_program(main_program, "save_inference_model")
    feeds = _name_list(feeded_var_names, "feeded_var_names")
    targets = _name_list(target_vars, "target_vars", (Variable, str))
    for n in feeds + targets:
        program.global_block().var(n)  # NotFoundError with a suggestion
    model_file = os.path.basename(model_filename or MODEL_FILENAME)
    if any(op.type == "auc" for op in program.global_block().ops):
        warnings.warn(AUC_WARNING, stacklevel=2)  # its states are saved as they are now
    targets = _scaled_targets(program, target_vars, targets)
    if export_for_deployment:  # fluid's model: the feed and fetch ops name its inputs, targets
        program = prune(program.clone(for_test=True), feeds, targets)
        add_feed_fetch_ops(program, feeds, targets)
    else:
        model_file += ".main_program"  # the whole program, under fluid's name for it
    data = json.loads(program.to_json())  # to_json names any attribute JSON cannot hold
    data.update(feed_names=feeds, fetch_names=targets)
    text = json.dumps(data, sort_keys=True)
    persistables = [v for v in program.list_vars() if is_persistable(v)]
    if program_only:
        warnings.warn(PROGRAM_ONLY_WARNING, stacklevel=2)
    elif not persistables:
        warnings.warn(NO_VARIABLE_WARNING, stacklevel=2)  # the model is saved, no parameters
    arrays = {} if program_only else _gather(persistables, None, executor)
    params_name = os.path.basename(params_filename) if params_filename else None
    os.makedirs(dirname, exist_ok=True)
    with AtomicFiles(dirname) as files:
        _stage_vars(files, arrays, params_name)
        files.write(model_file, text_writer(text))
    return targets


def _scaled_targets(program: Program, target_vars, names: list[str]) -> list[str]:
    """fluid 1.8's save_inference_model fetches each Variable target through a `scale` by 1
    named save_infer_model/scale_<i> (so an activation's output survives inference-time
    pruning); a target given by name stays as it is. As in fluid, they are appended to the
    caller's program (a second save names its scale ..._<i>.tmp_1)."""
    items = [target_vars] if isinstance(target_vars, (str, Variable)) else list(target_vars)
    block, out = program.global_block(), []
    for i, (item, name) in enumerate(zip(items, names)):
        if not isinstance(item, Variable):
            out.append(name)
            continue
        source = block.var(name)
        k = 0
        while block.has_var(f"save_infer_model/scale_{i}.tmp_{k}"):
            k += 1
        scaled = block.create_var(name=f"save_infer_model/scale_{i}.tmp_{k}",
                                  shape=source.shape, dtype=source.dtype,
                                  lod_level=source.lod_level)
        block.append_op("scale", {"X": [name]}, {"Out": [scaled.name]},
                        {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})
        out.append(scaled.name)
    return out


def load_inference_model(dirname: str, executor, model_filename: str | None = None,
                         params_filename: str | None = None, pserver_endpoints=None) -> list:
    """Load what save_inference_model wrote: [program, feed_target_names, fetch_targets], the
    parameters going to the global scope.

    >>> # program, feeds, fetches = load_inference_model("infer", exe)
    >>> # exe.run(program, feed={feeds[0]: img}, fetch_list=fetches)
    """
    if dirname is None:  # fluid's load from memory: the model's and the parameters' bytes
        return _load_inference_model_from_memory(executor, model_filename, params_filename)
    dirname = _check_dirname(dirname, "load_inference_model")
    if not os.path.isdir(dirname):
        raise NotFoundError(f"load_inference_model: there is no directory '{dirname}'")
    model_file = os.path.basename(model_filename or MODEL_FILENAME)
    model_path = os.path.join(dirname, model_file)
    params_name = os.path.basename(params_filename) if params_filename else None
    fluid_bytes = _fluid_model_bytes(model_path)
    if fluid_bytes is not None:  # saved by PaddlePaddle 1.8 itself (protobuf, tensor files)
        program = program_from_fluid(fluid_bytes)
        holders = _fluid_persistables(program)
        arrays = read_fluid_vars(dirname, [v.name for v in holders], params_name)
        return _loaded_fluid_model(executor, program, holders, arrays, model_path)
    with reading(dirname) as manifest:  # the model and its parameters from one save
        program, data = _read_model(model_path, manifest.get(model_file))
        load_persistables(executor, dirname, program, params_name)
    return _model_targets(program, data)


def _fluid_model_bytes(model_path: str):
    """The bytes of a model file fluid 1.8 wrote (a protobuf ProgramDesc), else None."""
    try:
        with open(model_path, "rb") as f:
            head = f.read(1)
            if not head or head == b"{":
                return None
            buf = head + f.read()
    except OSError:
        return None
    return buf if is_fluid_model(buf) else None


def _fluid_persistables(program: Program) -> list:
    """The variables a fluid model's parameter files hold (not the feed / fetch holders)."""
    return [v for v in program.list_vars() if v.persistable
            and v.type not in ("FEED_MINIBATCH", "FETCH_LIST", "RAW")]


def _loaded_fluid_model(executor, program: Program, holders: list, arrays: dict,
                        where: str) -> list:
    for var in holders:
        got = arrays[var.name]
        if tuple(got.shape) != tuple(var.shape) or str(got.dtype) != var.dtype:
            raise InvalidArgumentError(
                f"load_inference_model: '{var.name}' of {where} holds {got.dtype}"
                f"{list(got.shape)}, its program declares {var.dtype}{list(var.shape)}")
    _store(executor, holders, arrays)
    program._is_test = True
    return _model_targets(program, {"feed_names": [], "fetch_names": []})


def _model_targets(program: Program, data: dict) -> list:
    """[program, feed names, fetch Variables]: a model's feed / fetch ops name them, in their
    `col` order, as fluid's; a model saved without them (program only, or by an older spmd)
    by the names stored beside the program."""
    feeds, fetches = feed_fetch_names(program)
    if not feeds and not fetches:
        feeds, fetches = list(data["feed_names"]), list(data["fetch_names"])
    return [program, feeds, [program.global_block().var(n) for n in fetches]]


def _load_inference_model_from_memory(executor, model_bytes, params_bytes) -> list:
    if model_bytes is None:
        raise ValueError("load_inference_model: with dirname=None, model_filename must be the "
                         "model's bytes (the model file's contents); got None")
    if params_bytes is None:
        raise ValueError("load_inference_model: with dirname=None, params_filename must be the "
                         "parameters' bytes (what save_persistables(executor, None, program) "
                         "returned); got None")
    if not isinstance(model_bytes, (bytes, bytearray, str)):
        raise InvalidArgumentError(
            f"load_inference_model: with dirname=None, model_filename must be the model's "
            f"bytes, got {type(model_bytes).__name__}")
    if not isinstance(model_bytes, str) and is_fluid_model(bytes(model_bytes)):
        program = program_from_fluid(bytes(model_bytes))  # fluid 1.8's model and parameters
        holders = _fluid_persistables(program)
        arrays = read_combined(bytes(params_bytes), [v.name for v in holders],
                               "the parameter bytes given")
        return _loaded_fluid_model(executor, program, holders, arrays, "the model bytes given")
    text = model_bytes if isinstance(model_bytes, str) else bytes(model_bytes).decode("utf-8")
    program, data = _read_model("the model bytes given", None, text)
    load_persistables(executor, None, program, params_bytes)
    return _model_targets(program, data)


def _read_model(model_path: str, entry: dict | None, text: str | None = None):
    try:
        data = json.loads(read_text(model_path, entry) if text is None else text)
    except FileNotFoundError:
        raise NotFoundError(
            f"load_inference_model: no model file '{model_path}'; pass model_filename= if it "
            f"was saved under another name") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidArgumentError(
            f"load_inference_model: '{model_path}' is neither an spmd model (JSON: {e}) nor "
            f"one PaddlePaddle 1.8 saved (a protobuf ProgramDesc)") from None
    if not isinstance(data, dict) or "feed_names" not in data or "fetch_names" not in data:
        raise InvalidArgumentError(
            f"load_inference_model: '{model_path}' has no feed and fetch names; it was not "
            f"written by save_inference_model")
    program = Program.from_dict(data)
    program._is_test = True
    return program, data


# -- paddle 2.x --------------------------------------------------------------------------------


def save(program: Program, model_path: str, protocol: int = 4) -> None:
    """Save `program`'s parameters to model_path + '.pdparams', its other persistables
    (optimizer state) to '.pdopt' and the program to '.pdmodel' (JSON). The files are .npz
    archives whatever `protocol` says (it is kept for paddle's signature).

    >>> # spmd.io.save(main_program, "ckpt/step_100")
    """
    prefix = model_prefix(model_path)
    given, program = program, as_program(program, "save")
    params = _gather([v for v in program.list_vars() if is_parameter(v)])
    opt = _gather([v for v in program.list_vars() if is_belong_to_optimizer(v)], given)
    text = program.to_json()
    directory, base = os.path.split(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with AtomicFiles(directory) as files:
        files.write(base + ".pdparams", npz_writer(params))
        files.write(base + ".pdopt", npz_writer(opt))
        files.write(base + ".pdmodel", text_writer(text))


def load(program: Program, model_path: str, executor=None, var_list=None) -> None:
    """Load what save wrote into the global scope; every parameter (and, when the program has
    optimizer state, every optimizer variable) must be in the files. A directory written by
    save_persistables / save_vars is read too (`var_list` then picks the variables).

    >>> # spmd.io.load(main_program, "ckpt/step_100", exe)
    """
    prefix = model_prefix(model_path)
    program = as_program(program, "load")
    directory, base = os.path.split(prefix)
    if not os.path.exists(prefix + ".pdparams") and os.path.exists(model_path):
        _load_old_format(program, model_path, executor, var_list)
        return
    with reading(directory) as manifest:  # .pdparams and .pdopt from one save
        params = [v for v in program.list_vars() if is_parameter(v)]
        opt = [v for v in program.list_vars() if is_belong_to_optimizer(v)]
        refuse_sharded(opt, executor)
        headers = inspect_npz(prefix + ".pdparams", [v.name for v in params],
                              manifest.get(base + ".pdparams"))
        if opt:
            headers.update(inspect_npz(prefix + ".pdopt", [v.name for v in opt],
                                       manifest.get(base + ".pdopt")))
        arrays = _read_checked(params + opt, headers,
                               _in_place_targets(executor, params + opt))
    _store(executor, params + opt, arrays)


def _load_old_format(program, model_path: str, executor, var_list) -> None:
    """fluid.load of what save_params / save_persistables / save_vars wrote, as fluid 1.8:
    an executor is required (ValueError); a directory's files (`var_list` or every
    persistable), or a single file (filename=) whose variables `var_list` must name
    (ValueError without it, LookupError for one not in the program); a file that does not
    hold them as the program declares them is a RuntimeError."""
    if executor is None:
        raise InvalidArgumentError(
            f"load: '{model_path}' was written by save_params / save_persistables / "
            f"save_vars (no .pdparams file): an executor is required to load it")
    if os.path.isdir(model_path):
        directory, filename = model_path, None
        vars = var_list if var_list is not None else [
            v for v in program.list_vars() if is_persistable(v)]
    else:
        if var_list is None:
            raise InvalidArgumentError(
                f"load: '{model_path}' is a single file (save_params / save_persistables / "
                f"save_vars with filename=): var_list is required to say which variables it "
                f"holds (e.g. fluid.io.get_program_persistable_vars(program))")
        names = {v.name for v in program.list_vars()}
        for var in var_list:
            if getattr(var, "name", var) not in names:
                raise LookupError(
                    f"load: variable '{getattr(var, 'name', var)}' of var_list is not in the "
                    f"program")
        directory, filename = os.path.split(model_path)
        vars = var_list
    try:
        load_vars(executor, directory, program, vars=vars, filename=filename)
    except (InvalidArgumentError, NotFoundError) as e:
        raise PreconditionError(
            f"load: '{model_path}' does not hold the variables as the program declares them "
            f"(is it what save_params / save_persistables / save_vars wrote for it?): {e}"
        ) from e
