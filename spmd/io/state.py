"""Program state as a plain dict: fluid 1.8's `load_program_state` / `set_program_state` and
the two listings beside them, `get_program_parameter` / `get_program_persistable_vars`.

The common use is loading pretrained weights into a new program: read what an earlier run
saved (with `fluid.save`, or with `save_params` / `save_persistables` / `save_vars`) as
{name: numpy array}, edit it if needed, and set it into the new program's scope. Reading goes
through spmd/io/reading.py, so every file is checked (header, size, manifest) before any is
read, and pickles are refused.

`set_program_state` checks every value before it sets any (fluid sets them one by one and can
stop half-way); its errors are also AssertionErrors, the type fluid raises, so code that catches
those keeps working.

    >>> # state = fluid.io.load_program_state("pretrained/model")   # .pdparams + .pdopt
    >>> # state.pop("fc_9.w_0")                                      # a head not reused
    >>> # fluid.io.set_program_state(new_main_program, state)
"""
from __future__ import annotations

import os
import warnings
import zipfile

import numpy as np

from ..core.program import Program
from ..core.scope import global_scope
from ..core.variable import Variable
from ..errors import InvalidArgumentError, NotFoundError, PreconditionError
from .files import reading
from .reading import inspect_npy, inspect_npz, read_arrays
from .variables import (
    as_program,
    check_matches,
    is_parameter,
    is_persistable,
    model_prefix,
    placer,
    refuse_sharded,
    var_file,
)

__all__ = ["get_program_parameter", "get_program_persistable_vars", "load_program_state",
           "set_program_state"]


class ProgramStateMismatch(InvalidArgumentError, AssertionError):
    """A value of a state dict does not fit the program (shape, dtype, type). Also an
    AssertionError, which is what fluid raises here."""


class ProgramStateUninitialized(PreconditionError, AssertionError):
    """A persistable variable of the program has no value in the scope yet."""


def _program(program, who: str) -> Program:
    if program is None:
        raise InvalidArgumentError(
            f"{who}: program is None; pass the Program, e.g. fluid.default_main_program()")
    return as_program(program, who)


def get_program_parameter(program) -> list:
    """Every Parameter (weights, biases) of `program`, in the program's order.

    >>> # [p.name for p in fluid.io.get_program_parameter(main)]   # ['fc_0.w_0', 'fc_0.b_0']
    """
    return [v for v in _program(program, "get_program_parameter").list_vars()
            if is_parameter(v)]


def get_program_persistable_vars(program) -> list:
    """Every persistable variable of `program` (parameters, optimizer state, learning rates),
    in the program's order: what save_persistables writes and set_program_state sets.

    >>> # [v.name for v in fluid.io.get_program_persistable_vars(main)]
    """
    return [v for v in _program(program, "get_program_persistable_vars").list_vars()
            if is_persistable(v)]


# -- loading -----------------------------------------------------------------------------------
def load_program_state(model_path, var_list=None) -> dict:
    """{name: numpy array} of a saved model, without a program or a scope.

    `model_path` is what `fluid.save(program, model_path)` was given (a '.pdparams', '.pdopt'
    or '.pdmodel' suffix is dropped): the parameters and, when there is a '.pdopt' file, the
    optimizer state. Without a '.pdparams' file, `model_path` is a directory written by
    save_params / save_persistables / save_vars (one file per variable: all of them are read,
    or those of `var_list`), or the single file they wrote with filename= (then `var_list`,
    Variables or names, says which variables to read from it).

    >>> # state = fluid.io.load_program_state("ckpt/model")
    >>> # state = fluid.io.load_program_state("ckpt/params", var_list=main.all_parameters())
    """
    if not isinstance(model_path, (str, os.PathLike)) or not os.fspath(model_path):
        raise InvalidArgumentError(
            f"load_program_state: model_path must be a path, got {model_path!r}")
    model_path = os.fspath(model_path)
    prefix = model_prefix(model_path)
    wanted = _wanted(var_list)
    if os.path.exists(prefix + ".pdparams"):
        return _read_saved(prefix)
    if os.path.isfile(model_path):
        if wanted is None:
            raise InvalidArgumentError(
                f"load_program_state: '{model_path}' is a single file (save_vars / "
                f"save_params / save_persistables with filename=...); pass var_list= (the "
                f"program's Variables or their names) to say which variables to read from it")
        directory, filename = os.path.split(model_path)
        return _read_files(directory, wanted, filename)
    if os.path.isdir(model_path):
        names = list(wanted) if wanted is not None else _saved_names(model_path)
        return _read_files(model_path, wanted if wanted is not None else dict.fromkeys(names),
                           None)
    raise NotFoundError(
        f"load_program_state: nothing saved at '{model_path}': neither "
        f"'{prefix}.pdparams' (written by fluid.save) nor a file or directory of that name "
        f"(written by save_params / save_persistables / save_vars); check the path")


def _wanted(var_list) -> dict | None:
    """{name: Variable or None} of var_list; Variables are also checked against the files."""
    if var_list is None:
        return None
    items = [var_list] if isinstance(var_list, (str, Variable)) else list(var_list)
    wanted = {}
    for item in items:
        if isinstance(item, Variable):
            wanted[item.name] = item
        elif isinstance(item, str):
            wanted.setdefault(item, None)
        else:
            raise InvalidArgumentError(
                f"load_program_state: var_list must hold Variables or names, got "
                f"{type(item).__name__}")
    return wanted


def _read_saved(prefix: str) -> dict:
    """Every array of prefix.pdparams and (if there is one) prefix.pdopt, from one save."""
    directory, base = os.path.split(prefix)
    with reading(directory) as manifest:
        headers = {}
        for suffix in (".pdparams", ".pdopt"):
            path = prefix + suffix
            if suffix == ".pdopt" and not os.path.exists(path):
                continue  # fluid writes none for an optimizer without state
            headers.update(inspect_npz(path, _members(path), manifest.get(base + suffix)))
        return read_arrays(list(headers.values()))


def _members(path: str) -> list[str]:
    """The variable names in the archive `path` (inspect_npz reports a damaged one)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [m[:-4] for m in archive.namelist() if m.endswith(".npy")]
    except (zipfile.BadZipFile, OSError):
        return []  # not an archive: inspect_npz names what the file is instead


def _saved_names(directory: str) -> list[str]:
    """The variables saved one file each in `directory` (`<name>.npy`, spmd's bookkeeping
    files aside), its subfolders' too: as fluid's load_program_state walks the folder, a
    variable 'GRUCell/w' is the file GRUCell/w.npy."""
    names = []
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        below = os.path.relpath(folder, directory)
        names += [n[:-4] if below == "." else f"{below}/{n[:-4]}".replace(os.sep, "/")
                  for n in files if n.endswith(".npy") and not n.startswith(".")]
    names.sort()
    if not names:
        others = sorted(n for n in os.listdir(directory) if not n.startswith("."))
        raise NotFoundError(
            f"load_program_state: '{directory}' holds no per-variable files (<name>.npy); it "
            f"holds {others[:8]}. If the variables were saved into one file with filename=, "
            f"pass model_path='{os.path.join(directory, 'FILENAME')}' and var_list=")
    return names


def _read_files(directory: str, wanted: dict, filename: str | None) -> dict:
    with reading(directory) as manifest:
        if filename is not None:
            headers = inspect_npz(os.path.join(directory, filename), list(wanted),
                                  manifest.get(filename))
        else:
            files = {n: var_file(directory, n) for n in wanted}
            headers = {n: inspect_npy(os.path.join(directory, f), n, manifest.get(f))
                       for n, f in files.items()}
        for name, var in wanted.items():
            if var is not None:
                check_matches(var, headers[name])
        return read_arrays([headers[n] for n in wanted])


# -- setting -----------------------------------------------------------------------------------
def set_program_state(program, state_dict) -> None:
    """Set the persistable variables of `program` that `state_dict` names to its values, in
    the global scope (run the startup program first). Every value must have the shape and
    dtype of the variable's current value; all are checked before any is set. Keys that name
    no persistable variable of `program` are ignored with a warning; variables the dict does
    not name keep their values.

    >>> # exe.run(fluid.default_startup_program())
    >>> # fluid.io.set_program_state(main, fluid.io.load_program_state("pretrained/model"))
    """
    program = _program(program, "set_program_state")
    if not hasattr(state_dict, "items"):
        raise InvalidArgumentError(
            f"set_program_state: state_dict must be a dict {{name: numpy array}} (what "
            f"load_program_state returns), got {type(state_dict).__name__}")
    scope = global_scope()
    persistables = [v for v in program.list_vars() if is_persistable(v)]
    uninitialized = [v.name for v in persistables if scope.get(v.name) is None]
    if uninitialized:
        raise ProgramStateUninitialized(
            f"set_program_state: variable(s) {uninitialized[:5]} of the program have no value "
            f"in the scope; run the startup program first (exe.run(fluid.default_startup_"
            f"program())), in the same fluid.scope_guard as this call")
    chosen = [v for v in persistables if v.name in state_dict]
    refuse_sharded(chosen)
    values = {v.name: _checked_value(v.name, state_dict[v.name], scope.get(v.name))
              for v in chosen}
    placed = {n: placer(None, scope, n)(a) for n, a in values.items()}
    for name, array in placed.items():
        scope._assign(name, array)
    used = set(values)
    unused = [str(k) for k in state_dict if k not in used]
    if unused:
        warnings.warn(
            f"set_program_state: {len(unused)} key(s) of state_dict name no persistable "
            f"variable of the program and were not set: {' '.join(unused)}", stacklevel=2)


def _checked_value(name: str, value, current) -> np.ndarray:
    """`value` as a fresh host array (the caller's dict stays its own), or why it does not
    fit the variable whose value is now `current`."""
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise ProgramStateMismatch(
            f"set_program_state: the value of '{name}' is a {type(value).__name__}; it must "
            f"be an array: pass np.asarray(value, dtype=...) with the variable's dtype "
            f"{np.dtype(current.dtype).name}")
    array = np.array(value)  # a copy, and a host one for a cupy value
    want_shape, want_dtype = tuple(current.shape), np.dtype(current.dtype)
    if array.shape != want_shape:
        raise ProgramStateMismatch(
            f"set_program_state: '{name}' has shape {list(array.shape)} in state_dict, but the "
            f"program's variable has shape {list(want_shape)}; the state was saved from a "
            f"different model: leave this key out (state_dict.pop('{name}')) or reshape it")
    if array.dtype != want_dtype:
        raise ProgramStateMismatch(
            f"set_program_state: '{name}' has dtype {array.dtype.name} in state_dict, but the "
            f"program's variable has dtype {want_dtype.name}; convert it "
            f"(state_dict['{name}'] = value.astype('{want_dtype.name}')) if that is intended")
    return np.ascontiguousarray(array)
