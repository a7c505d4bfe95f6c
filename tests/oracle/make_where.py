"""Reference outputs for the `where` op and paddle.where, for tests/unit/test_op_where.py.

Run it once with each oracle's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_where.py   # -> data/where.json
    cd /tmp && /tmp/pd33/bin/python /path/to/tests/oracle/make_where.py   # -> where_paddle.json

- PaddlePaddle 1.8.5 has the `where` op (Condition, X, Y -> Out, one shape for all three) but no
  Python function that emits it, so OP_CASES append it to the block directly;
- paddle.where (it broadcasts, and takes Python numbers) is paddle 2.x's, so LAYER_CASES come
  from PaddlePaddle 3.3.1 in static mode with the legacy IR (FLAGS_enable_pir_api=0).

Each case stores Out, its static shape and the gradients of mean(Out * W) (W fixed, fed as
"w") for the case's float feeds, or {"error": stage} ("build" or "run") where the oracle
refuses it. run_op_case and run_layer_case are shared with the test, which runs the same
programs with spmd.
"""
import os
import sys

import numpy as np

_R = np.random.RandomState(7)
_COND = _R.rand(3, 4) > 0.5
FEEDS = {
    "c": _COND, "c1": _COND[:, :1].copy(), "ci": _COND.astype("int32"),
    "x": _R.uniform(-1, 1, (3, 4)).astype("float32"),
    "y": _R.uniform(-1, 1, (3, 4)).astype("float32"),
    "y1": _R.uniform(-1, 1, (1, 4)).astype("float32"),
    "x3": _R.uniform(-1, 1, (3, 1)).astype("float32"),
    "y3": _R.uniform(-1, 1, (2, 3, 4)).astype("float32"),
    "xd": _R.uniform(-1, 1, (3, 4)),
    "yd": _R.uniform(-1, 1, (3, 4)),
    "i": np.arange(12, dtype="int64").reshape(3, 4),
    "j": -np.arange(12, dtype="int64").reshape(3, 4),
}
FEEDS["i32"], FEEDS["j32"] = FEEDS["i"].astype("int32"), FEEDS["j"].astype("int32")
BATCHED = {"c", "x", "y"}  # declared [-1, 4] in a case run with batched=True

# the op: (Condition, X, Y) feed names, whether they are declared with an unknown batch dim
OP_CASES = {
    "float32": ("c", "x", "y", False),
    "float64": ("c", "xd", "yd", False),
    "int64": ("c", "i", "j", False),
    "int32": ("c", "i32", "j32", False),
    "batch": ("c", "x", "y", True),
    "bad_cond_shape": ("c1", "x", "y", False),
    "bad_y_shape": ("c", "x", "y1", False),
    "bad_cond_dtype": ("ci", "x", "y", False),
    "bad_y_dtype": ("c", "x", "yd", False),
}

# paddle.where(condition, x, y): a str names a feed, anything else is passed as it is
LAYER_CASES = {
    "same_shape": ("c", "x", "y"),
    "y_broadcast": ("c", "x", "y1"),
    "cond_broadcast": ("c1", "x", "y"),
    "all_broadcast": ("c1", "x3", "y3"),
    "y_number": ("c", "x", 0.5),
    "x_number": ("c", -2.0, "y"),
    "both_numbers": ("c", 1.0, 0.0),
    "int64": ("c", "i", "j"),
    "int64_number": ("c", "i", 3),
    "bad_cond_dtype": ("ci", "x", "y"),
}


def weights(shape, dtype):
    return np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape).astype(dtype)


def _run(fluid, build, feed_names, batched=False):
    prog, startup = fluid.Program(), fluid.Program()
    floats = sorted(k for k in feed_names if FEEDS[k].dtype.kind == "f")
    feed = {k: FEEDS[k] for k in feed_names}
    stage = "build"
    try:
        with fluid.program_guard(prog, startup):
            vs = {}
            for k in feed_names:
                a = FEEDS[k]
                shape = [-1] + list(a.shape[1:]) if batched and k in BATCHED else list(a.shape)
                vs[k] = fluid.data(k, shape, str(a.dtype))
                vs[k].stop_gradient = k not in floats
            out = build(vs)
            grads = []
            if floats:
                feed["w"] = weights([3 if d == -1 else d for d in out.shape],
                                    FEEDS[floats[0]].dtype)
                w = fluid.data("w", list(out.shape), str(feed["w"].dtype))
                grads = fluid.gradients(fluid.layers.mean(out * w), [vs[k] for k in floats])
        stage = "run"
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        got = exe.run(prog, feed=feed, fetch_list=[out] + list(grads))
    except Exception:  # noqa: BLE001 - what the oracle refuses is the answer
        return {"error": stage}
    return {"outs": [np.asarray(a) for a in got[:1]],
            "grads": [np.asarray(a) for a in got[1:]],
            "shape": [int(d) for d in out.shape], "wrt": floats}


def run_op_case(fluid, name):
    c, x, y, batched = OP_CASES[name]

    def build(vs):
        block = fluid.default_main_program().current_block()
        out = block.create_var(name="where_out", dtype=vs[x].dtype)
        block.append_op(type="where", inputs={"Condition": [vs[c]], "X": [vs[x]], "Y": [vs[y]]},
                        outputs={"Out": [out]})
        return out

    return _run(fluid, build, [c, x, y], batched)


def run_layer_case(fluid, paddle, name):
    args = LAYER_CASES[name]
    return _run(fluid, lambda vs: paddle.where(*[vs[a] if isinstance(a, str) else a
                                                 for a in args]),
                [a for a in args if isinstance(a, str)])


def _static_shim(paddle):
    """What _run uses of fluid, from paddle 2.x's static API."""
    static = paddle.static

    class Fluid:
        Program, program_guard, Executor = static.Program, static.program_guard, static.Executor
        CPUPlace, gradients = paddle.CPUPlace, static.gradients
        data = staticmethod(static.data)

        class layers:
            mean = staticmethod(paddle.mean)  # 3.3.1's paddle.sum fails in the legacy IR

    return Fluid


def main():
    os.environ["FLAGS_enable_pir_api"] = "0"  # 3.3.1: the legacy static IR
    import paddle

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    if paddle.__version__.startswith("1."):
        import paddle.fluid as fluid

        save("where", {n: run_op_case(fluid, n) for n in OP_CASES},
             meta={"paddle": paddle.__version__})
    else:
        paddle.enable_static()
        fluid = _static_shim(paddle)
        save("where_paddle", {n: run_layer_case(fluid, paddle, n) for n in LAYER_CASES},
             meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
