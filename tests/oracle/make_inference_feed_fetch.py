"""Oracle: fluid 1.8's inference models carry feed and fetch ops. A two-input model saved by
save_inference_model: the loaded program's ops, its feed / fetch ops' targets and `col`s, the
holder variables' kinds, the feed and fetch names load_inference_model returns, and the
model's outputs for given inputs. The saved model itself (fluid's protobuf __model__ and its
parameter files) is kept in tests/oracle/data/fluid18_inference_model/ for the test that
loads and runs it.

    cd /tmp && /path/to/oracle-venv/bin/python \
        /path/to/spmd/tests/oracle/make_inference_feed_fetch.py
"""
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from oracle_io import save  # noqa: E402

MODEL_DIR = os.path.join(HERE, "data", "fluid18_inference_model")
# the same model saved with model_filename="model" and params_filename="params" (one file)
COMBINED_DIR = MODEL_DIR + "_combined"
W = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 1.5]], "float32")
B = np.array([0.1, -0.2], "float32")
XV = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], "float32")
ZV = np.array([[2.0, -1.0], [0.5, 0.5]], "float32")


def build(fluid):
    """out = relu(fc(x) + z), and mean(out): two feeds, two targets."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        z = fluid.data("z", [None, 2], "float32")
        h = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(W)),
            bias_attr=fluid.ParamAttr(
                name="b", initializer=fluid.initializer.NumpyArrayInitializer(B)))
        out = fluid.layers.relu(fluid.layers.elementwise_add(h, z))
        avg = fluid.layers.mean(out)
    return main, startup, out, avg


def main():
    import paddle
    import paddle.fluid as fluid

    prog, startup, out, avg = build(fluid)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    tmp = tempfile.mkdtemp()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_inference_model(tmp, ["x", "z"], [out, avg], exe, prog)
        combined = tempfile.mkdtemp()
        fluid.io.save_inference_model(combined, ["x", "z"], [out, avg], exe, prog,
                                      model_filename="model", params_filename="params")
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(tmp, exe)
        block = program.global_block()
        results = exe.run(program, feed={"x": XV, "z": ZV}, fetch_list=fetches)
        cases = {
            "ops": [op.type for op in block.ops],
            "feed_ops": [[op.output("Out")[0], op.attr("col")] for op in block.ops
                         if op.type == "feed"],
            "fetch_ops": [[op.input("X")[0], op.attr("col")] for op in block.ops
                          if op.type == "fetch"],
            "holders": {n: str(block.var(n).type) for n in ("feed", "fetch")},
            "feed_names": feeds,
            "fetch_names": [v.name for v in fetches],
            "out": results[0],
            "avg": results[1],
        }
    if os.path.isdir(MODEL_DIR):
        shutil.rmtree(MODEL_DIR)
    shutil.copytree(tmp, MODEL_DIR)
    if os.path.isdir(COMBINED_DIR):
        shutil.rmtree(COMBINED_DIR)
    shutil.copytree(combined, COMBINED_DIR)
    cases["files"] = sorted(os.listdir(MODEL_DIR))
    save("inference_feed_fetch", cases, meta={"fluid": paddle.__version__})


if __name__ == "__main__":
    main()
