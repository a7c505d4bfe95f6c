"""Save a checkpoint of four variables, all filled with one value, in one of spmd.io's ways:
test_checkpoint_atomic.py runs it under SPMD_TEST_KILL_AT_FS_STEP.

    python save_checkpoint.py DIR VALUE {per_file,one_file,paddle2}
"""
from __future__ import annotations

import sys

import numpy as np

import spmd.fluid as fluid

SHAPES = {"a": [3, 4], "b": [4], "c": [2, 2], "d": [5]}


def program():
    main = fluid.Program()
    block = main.global_block()
    for name, shape in SHAPES.items():
        block.create_parameter(name=name, shape=shape, dtype="float32")
    return main


def main():
    directory, value, how = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    prog = program()
    scope = fluid.global_scope()
    for p in prog.all_parameters():
        scope.var(p.name).get_tensor().set(np.full(p.shape, value, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    if how == "per_file":
        fluid.io.save_persistables(exe, directory, prog)
    elif how == "one_file":
        fluid.io.save_persistables(exe, directory, prog, filename="all")
    elif how == "paddle2":
        fluid.save(prog, directory + "/m")


if __name__ == "__main__":
    main()
