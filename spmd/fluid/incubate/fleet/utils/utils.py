"""fluid.incubate.fleet.utils.utils: fleet's program-file helpers: save_program /
load_program (binary: spmd's serialized program, Program.serialize_to_string; text: its
indented JSON), program_type_trans between the two, graphviz of a block, and
check_pruned_program_vars. fluid writes protobuf ProgramDescs; spmd's program files are its
own JSON, so files cross between the two only through spmd. check_saved_vars_try_dump
(loading fluid's dumped variables) is named in docs/fluid_coverage.md.

>>> import os, tempfile
>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.relu(x)
>>> path = os.path.join(tempfile.mkdtemp(), "__model__")
>>> save_program(main, path)
>>> [op.type for op in load_program(path).global_block().ops]
['relu']
"""
from __future__ import annotations

import json
import logging
import os

from .....core.program import Program
from ...._pending import missing_names
from ....debugger import draw_block_graphviz

__all__ = ["check_pruned_program_vars", "graphviz", "load_program", "parse_program",
           "program_type_trans", "save_program"]

logger = logging.getLogger(__name__)


def save_program(program, model_filename: str = "__model__", is_text: bool = False) -> None:
    """Write `program` to `model_filename` (text: indented JSON)."""
    if is_text:
        with open(model_filename, "w") as f:
            json.dump(program.to_dict(), f, indent=1, sort_keys=True)
    else:
        with open(model_filename, "wb") as f:
            f.write(program.serialize_to_string())


def load_program(model_filename: str, is_text: bool = False) -> Program:
    """The program save_program wrote."""
    if is_text:
        with open(model_filename) as f:
            return Program.from_dict(json.load(f))
    with open(model_filename, "rb") as f:
        return Program.parse_from_string(f.read())


def program_type_trans(prog_dir: str, prog_fn: str, is_text: bool) -> str:
    """Rewrite `prog_dir/prog_fn` in the other form (text -> `.bin`, binary -> `.pbtxt`);
    returns the new file's name."""
    program = load_program(os.path.join(prog_dir, prog_fn), is_text)
    out_fn = prog_fn + (".bin" if is_text else ".pbtxt")
    save_program(program, os.path.join(prog_dir, out_fn), not is_text)
    return out_fn


def parse_program(program, output_dir: str) -> None:
    """Write the program's persistable variables, all variables and ops to
    `output_dir`/{persistable_vars,all_vars,ops}.txt."""
    os.makedirs(output_dir, exist_ok=True)
    block = program.global_block()
    listings = {
        "persistable_vars.txt": [repr(v) for v in block.vars.values() if v.persistable],
        "all_vars.txt": [repr(v) for v in block.vars.values()],
        "ops.txt": [repr(op) for op in block.ops],
    }
    for name, lines in listings.items():
        with open(os.path.join(output_dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")


def graphviz(block, output_dir: str = "", filename: str = "debug") -> None:
    """`output_dir/filename.dot` (and .pdf where Graphviz's dot is installed) of `block`."""
    draw_block_graphviz(block, path=os.path.join(output_dir, filename + ".dot"))


def check_pruned_program_vars(train_prog, pruned_prog) -> bool:
    """Whether every persistable variable of `pruned_prog` (feed and fetch aside) is in
    `train_prog` with the same shape and dtype; each mismatch is logged."""
    train = train_prog.global_block().vars
    ok = True
    for name, var in pruned_prog.global_block().vars.items():
        if not var.persistable or var.type in ("FEED_MINIBATCH", "FETCH_LIST"):
            continue
        other = train.get(name)
        if other is None:
            logger.error("not find variable '%s' in train program", name)
            ok = False
        elif (tuple(other.shape), other.dtype) != (tuple(var.shape), var.dtype):
            logger.error("variable '%s': shape %s / dtype %s in the pruned program, %s / %s "
                         "in the train program", name, list(var.shape), var.dtype,
                         list(other.shape), other.dtype)
            ok = False
    return ok


missing_names(globals(), ["check_saved_vars_try_dump"])
