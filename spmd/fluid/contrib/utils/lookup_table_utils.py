"""fluid.contrib.utils.lookup_table_utils: the distributed lookup table's helpers, for a model
trained in parameter-server mode with a table the pservers hold (embedding(...,
is_distributed=True)).

- convert_dist_to_sparse_program(trainer_program): the table's remote prefetch
  (distributed_lookup_table, what spmd's and fluid 1.8's transpiler emit) becomes local
  lookups of the table variable again, so the trained program runs inference in one process;
- load_persistables_for_inference(dirname, exe, program, table): loads the persistables
  save_persistables wrote into `dirname`, and the table from its blocks as the pservers saved
  them (`dirname/pserver_<i>/<table>.block<k>.npy` from checkpoint_notify, or fluid's
  `dirname/__lookup_table__/`), merged into the whole table (also written to
  `dirname/__lookup_table__/<table>.npy`);
- load_persistables_for_increment(dirname, exe, pserver_program, table, table_path): a pserver
  resuming training loads its own slices of every parameter it holds from the whole
  variables in `dirname`, and the table from `table_path`.

Files are spmd's (.npy, as fluid.io.save_vars writes them; never pickled).
"""
from __future__ import annotations

import logging
import os
import re
import time

import numpy as np

from ....core.program import Program
from ....errors import InvalidArgumentError
from ....io import load_vars, var_path

__all__ = ["load_persistables_for_increment", "load_persistables_for_inference",
           "convert_dist_to_sparse_program"]

_logger = logging.getLogger("lookup_table_utils")

model_filename = "__model__"
lookup_table_dir = "__lookup_table__"


def _read_npy(path: str, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InvalidArgumentError(f"{what}: cannot read '{path}' as a saved variable (.npy, "
                                   f"as fluid.io.save_vars writes it): {e}") from e


def _put(executor, name: str, value: np.ndarray) -> None:
    from ....core.scope import global_scope

    place = getattr(executor, "place", None)
    global_scope().var(name).get_tensor().set(value, place)


def _checked_shape(var, value: np.ndarray, path: str, what: str) -> np.ndarray:
    want = tuple(int(d) for d in var.shape)
    if all(d >= 0 for d in want) and tuple(value.shape) != want:
        raise InvalidArgumentError(f"{what}: '{path}' holds a {list(value.shape)} array but "
                                   f"variable '{var.name}' is {list(want)}")
    return value.astype(var.dtype, copy=False)


# -- convert_dist_to_sparse_program ------------------------------------------------------------

def convert_dist_to_sparse_program(program):
    """The trainer program with its distributed table's prefetch (one
    distributed_lookup_table op) turned back into one local lookup per ids input, reading the
    table variable (sparse, its padding_idx kept). None, with a warning, when the program
    has no distributed table."""
    if not isinstance(program, Program):
        raise InvalidArgumentError(f"convert_dist_to_sparse_program: program must be a "
                                   f"fluid.Program, got {type(program).__name__}")
    table = program._distributed_lookup_table
    if not table:
        _logger.warning("There are no distributed lookup tables need to be converted")
        return None
    block = program.global_block()
    positions = [i for i, op in enumerate(block.ops)
                 if op.type == "distributed_lookup_table" and op.input("W") == [table]]
    if not positions:
        raise InvalidArgumentError(
            f"convert_dist_to_sparse_program: the program names '{table}' its distributed "
            f"table but has no distributed_lookup_table op reading it; pass the trainer "
            f"program the DistributeTranspiler made")
    for index in reversed(positions):
        op = block.ops[index]
        version = op.attrs.get("lookup_table_version", "lookup_table")
        padding = op.attrs.get("padding_idx", -1)
        pairs = list(zip(op.input("Ids"), op.output("Outputs")))
        block._remove_op(index)
        for offset, (ids, out) in enumerate(pairs):
            block._insert_op(index + offset, version, {"Ids": [ids], "W": [table]},
                             {"Out": [out]},
                             {"is_sparse": True, "is_distributed": False,
                              "padding_idx": padding})
    return program


# -- load_persistables_for_increment -----------------------------------------------------------

def load_persistables_for_increment(dirname, executor, program, lookup_table_var,
                                    lookup_table_var_path):
    """On a pserver: every parameter piece this pserver holds (program._parameters_on_pservers
    for program._ps_endpoint) read from the whole variable saved in `dirname` (its rows, for a
    slice), and the table variable `lookup_table_var` of this pserver's program (the table,
    or the block of it this pserver holds) from the file `lookup_table_var_path`."""
    if not os.path.isdir(dirname):
        raise ValueError(f"There is no directory named '{dirname}'")
    if not os.path.exists(lookup_table_var_path):
        raise ValueError(f"There is no file named '{lookup_table_var_path}'")
    if not isinstance(program, Program):
        raise ValueError("program must be an instance of fluid.Program")
    overview = program._parameters_on_pservers
    if overview is None or program._ps_endpoint is None:
        raise InvalidArgumentError(
            "load_persistables_for_increment: the program is not a pserver program (it has no "
            "_parameters_on_pservers / _ps_endpoint); pass "
            "DistributeTranspiler.get_pserver_program(endpoint)")
    _logger.info("Start Load Sparse Program With Distributed Lookup Table Vars from %s, "
                 "time = %s", dirname, time.ctime())
    block = program.global_block()
    for piece in overview.get_distributed_vars_by_ep(program._ps_endpoint):
        origin, part = piece.origin, piece.slice
        if lookup_table_var in (origin.name, part.name):
            continue  # the table (or this pserver's block of it) comes from its own file
        path = var_path(dirname, origin.name)
        whole = _read_npy(path, "load_persistables_for_increment")
        if piece.is_slice:
            row = int(np.prod(part.shape[1:])) if len(part.shape) > 1 else 1
            start = int(piece.offset) // row
            value = whole[start:start + int(part.shape[0])]
        else:
            value = whole
        target = block.var(part.name) if block.has_var(part.name) else part
        _put(executor, part.name, _checked_shape(target, value, path,
                                                 "load_persistables_for_increment"))
    table = block.var(lookup_table_var)
    _put(executor, lookup_table_var, _checked_shape(
        table, _read_npy(lookup_table_var_path, "load_persistables_for_increment"),
        lookup_table_var_path, "load_persistables_for_increment"))
    _logger.info("Finish Load Sparse Program With Distributed Lookup Table Vars from %s, "
                 "time = %s", dirname, time.ctime())


# -- load_persistables_for_inference -----------------------------------------------------------

def _is_checkpoint_var(var, exclude) -> bool:
    """fluid's rule: persistables, but not feed/fetch/raw, gradients, trainer copies, blocks,
    temporaries or the excluded (the table)."""
    if getattr(var, "type", None) in ("FEED_MINIBATCH", "FETCH_LIST", "RAW"):
        return False
    name = var.name
    if "@GRAD" in name or ".trainer_" in name or ".block" in name or "tmp_" in name:
        return False
    return bool(var.persistable) and name not in exclude


def _table_pieces(dirname: str, table: str) -> list[tuple[int, str]]:
    """(block index, path) of the table's saved pieces: the whole table (-1) or its blocks."""
    pattern = re.compile(re.escape(table) + r"(?:\.block(\d+))?\.npy$")
    folders = [os.path.join(dirname, lookup_table_dir)] + sorted(
        os.path.join(dirname, d) for d in os.listdir(dirname) if d.startswith("pserver_"))
    found: dict[int, str] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            m = pattern.fullmatch(entry)
            if m:
                found.setdefault(int(m.group(1)) if m.group(1) else -1,
                                 os.path.join(folder, entry))
    if -1 in found:
        return [(-1, found[-1])]
    return sorted(found.items())


def load_persistables_for_inference(dirname, executor, program, lookup_table_var_name):
    """Load `program`'s persistables (from `dirname/__model__` when program is None) for local
    inference, and the distributed table `lookup_table_var_name` merged from its saved
    blocks; returns the program."""
    if not os.path.isdir(dirname):
        raise ValueError(f"There is no directory named '{dirname}'")
    if program:
        if not isinstance(program, Program):
            raise ValueError("program must be an instance of fluid.Program")
    else:
        with open(os.path.join(dirname, model_filename), "rb") as f:
            program = Program.parse_from_string(f.read())
    _logger.info("Start Load Sparse Program With Distributed Lookup Table Vars from %s, "
                 "time = %s", dirname, time.ctime())
    load_vars(executor, dirname, program,
              predicate=lambda v: _is_checkpoint_var(v, {lookup_table_var_name}))
    pieces = _table_pieces(dirname, lookup_table_var_name)
    if not pieces:
        raise InvalidArgumentError(
            f"load_persistables_for_inference: no saved piece of table "
            f"'{lookup_table_var_name}' in '{dirname}/{lookup_table_dir}' nor in its "
            f"pserver_<i> folders (the pservers' checkpoint_notify saves its blocks there)")
    blocks = [_read_npy(path, "load_persistables_for_inference") for _, path in pieces]
    whole = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=0)
    table = program.global_block().var(lookup_table_var_name)
    whole = _checked_shape(table, whole, ", ".join(p for _, p in pieces),
                           "load_persistables_for_inference")
    _put(executor, lookup_table_var_name, whole)
    merged = os.path.join(dirname, lookup_table_dir)
    os.makedirs(merged, exist_ok=True)
    np.save(os.path.join(merged, lookup_table_var_name + ".npy"), whole, allow_pickle=False)
    _logger.info("Finish Load Sparse Program With Distributed Lookup Table Vars from %s, "
                 "time = %s", dirname, time.ctime())
    return program
