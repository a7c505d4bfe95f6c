"""Save a checkpoint of six variables (five parameters, one optimizer state), each filled with
one value, in one of spmd.io's ways: test_checkpoint_atomic.py runs it under
SPMD_TEST_KILL_AT_FS_STEP, and several at once.

    python save_checkpoint.py DIR VALUE {per_file,one_file,paddle2,inference} [REPEAT]

With REPEAT the save is made REPEAT times, with VALUE, VALUE + 1, ...
"""
from __future__ import annotations

import sys

import numpy as np

import spmd.fluid as fluid

# "cell/e": a name with '/', saved as the file e.npy of the subfolder cell (as fluid saves
# fluid.layers.rnn's 'GRUCell/...' parameters)
PARAMS = {"a": [3, 4], "b": [4], "c": [2, 2], "d": [5], "cell/e": [2]}
SHAPES = {**PARAMS, "moment": [3, 4]}  # moment: a persistable, not a parameter (.pdopt)
WAYS = ("per_file", "one_file", "paddle2", "inference")
INFERENCE_VARS = ("a", "b")  # what the pruned inference program reads


def program():
    """y = x @ a + b, beside parameters c and d and the optimizer state `moment`."""
    main = fluid.Program()
    block = main.global_block()
    for name, shape in PARAMS.items():
        block.create_parameter(name=name, shape=shape, dtype="float32")
    block.create_var(name="moment", shape=SHAPES["moment"], dtype="float32", persistable=True)
    x = block.create_var(name="x", shape=(-1, 3), dtype="float32", is_data=True)
    for name in ("h", "y"):
        block.create_var(name=name, dtype="float32")
    block.append_op("mul", {"X": x, "Y": "a"}, {"Out": "h"})
    block.append_op("elementwise_add", {"X": "h", "Y": "b"}, {"Out": "y"})
    return main


def save(directory: str, value: float, how: str, prog=None, names=None):
    """Fill the variables (`names`, default all) with `value` in the global scope, save."""
    prog = prog or program()
    scope = fluid.global_scope()
    for name in names or SHAPES:
        scope.var(name).get_tensor().set(np.full(SHAPES[name], value, "float32"))
    exe = fluid.Executor(fluid.CPUPlace())
    if names is not None:
        fluid.io.save_vars(exe, directory, prog, vars=list(names))
    elif how == "per_file":
        fluid.io.save_persistables(exe, directory, prog)
    elif how == "one_file":
        fluid.io.save_persistables(exe, directory, prog, filename="all")
    elif how == "paddle2":
        fluid.save(prog, directory + "/m")
    elif how == "inference":
        fluid.io.save_inference_model(directory, ["x"], ["y"], exe, prog)
    else:
        raise SystemExit(f"unknown way {how!r}; one of {WAYS}")


def main():
    directory, value, how = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    prog = program()
    for i in range(repeat):
        save(directory, value + i, how, prog)


if __name__ == "__main__":
    main()
