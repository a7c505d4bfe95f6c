"""What fluid 1.8.5 does with integer Variables: Python operators (+ - * / // % ** by ints,
floats and Variables, both orders), integer elementwise_div / elementwise_pow / reduce_mean,
mixed dtypes, and the batch-dim paths, for tests/unit/test_int_math.py. Run with PaddlePaddle
1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_intmath.py

CASES maps a name to build(layers, vars) -> list of Variables to fetch. A case fluid refuses
(when building or running) is stored as {"error": exception class name}.
"""
import os
import sys

import numpy as np

_A = np.array([7, -7, 5, -5, 9, 1], "int64")
_B = np.array([2, 2, -3, -3, 4, 3], "int64")
FEEDS = {
    "a": _A, "b": _B, "a32": _A.astype("int32"), "b32": _B.astype("int32"),
    "f": np.array([7.5, -7.5, 5.0, -5.0, 9.0, 0.5], "float32"),
    "z": np.array([2, 0, 1, 1, 1, 1], "int64"),
    # powers whose float64 value is inexact, out of range, inf (0 ** -1) or fractional
    "pa": np.array([3, 7, 3, -3, 2, -2, 0, 1, -1, 5], "int64"),
    "pb": np.array([35, 20, 40, 3, -1, -1, -1, -5, -5, -3], "int64"),
    "m": np.array([[-7, -4, 2], [7, 4, 3]], "int64"),
    "ab": np.array([[7, -7, 5], [-5, 9, 1]], "int64"),
    "fb": np.array([[7.5, -7.5, 5.0], [-5.0, 9.0, 0.5]], "float32"),
}
BATCHED = {"ab", "fb"}  # declared with a batch dim: [-1, 3]


def _cases(a, b):
    return {
        "div": lambda L, d: [d[a] / 2, d[a] / 2.0, d[a] / 2.5, d[a] / d[b], 7 / d[a],
                             2 / d[a], 2.5 / d[a]],
        "scale": lambda L, d: [d[a] * 2.0, d[a] + 3, d[a] - 3, 3 - d[a], -d[a], 2 * d[a],
                               d[a] + 2.0, 4.0 - d[a]],
        "mul_frac": lambda L, d: [d[a] * 2.5],
        "rmul_frac": lambda L, d: [2.5 * d[a]],
        "add_frac": lambda L, d: [d[a] + 2.5],
        "sub_frac": lambda L, d: [d[a] - 2.5],
        "rsub_frac": lambda L, d: [2.5 - d[a]],
        "floordiv_mod": lambda L, d: [d[a] // 2, d[a] // 2.5, d[a] % 3, d[a] % 2.5,
                                      d[a] // d[b], d[a] % d[b]],
        "pow": lambda L, d: [d[a] ** 2, d[a] ** 2.5, 2 ** d[a], d[a] ** d[b], d[a] ** -1],
        "mixed": lambda L, d: [d[a] + d["f"], d["f"] + d[a], d[a] * d["f"], d["f"] / d[a],
                               d[a] > d["f"], d[a] < 2.5],
        "layers": lambda L, d: [L.elementwise_div(d[a], d[b]), L.reduce_mean(d[a]),
                                L.reduce_mean(-d[a]), L.scale(d[a], 0.5),
                                L.scale(d[a], 2.5, bias=0.7)],
    }


CASES = {}
for _suffix, (_a, _b) in (("int64", ("a", "b")), ("int32", ("a32", "b32"))):
    CASES.update({k + "_" + _suffix: v for k, v in _cases(_a, _b).items()})
CASES.update({
    "elementwise_pow_int": lambda L, d: [L.elementwise_pow(d["pa"], d["pb"])],
    "reduce_mean_int": lambda L, d: [L.reduce_mean(d["m"]), L.reduce_mean(d["m"], dim=1),
                                     L.reduce_mean(d["m"], dim=-1, keep_dim=True),
                                     L.reduce_mean(d["m"], dim=[0])],
    "div_by_zero_var": lambda L, d: [L.elementwise_div(d["a"], d["z"])],
    "div_by_zero_scalar": lambda L, d: [d["a"] / 0],
    "batch_int": lambda L, d: [d["ab"] / 2, d["ab"] * 3, 3 - d["ab"], d["ab"] // 2],
    "batch_rdiv_int": lambda L, d: [2 / d["ab"]],  # fluid 1.8.5 fails: see test_int_math.py
    "batch_float": lambda L, d: [2.0 / d["fb"], 2 ** d["fb"], d["fb"] / 2, 3 - d["fb"],
                                 d["fb"] ** 2],
    "float": lambda L, d: [d["f"] / 2, 2 / d["f"], d["f"] ** 2, 2 ** d["f"], d["f"] * 2.5],
})


def declare(fluid):
    return {k: fluid.data(k, [-1, 3] if k in BATCHED else list(v.shape), str(v.dtype))
            for k, v in FEEDS.items()}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, build in sorted(CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        try:
            with fluid.program_guard(prog, startup):
                fetch = build(fluid.layers, declare(fluid))
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            out[name] = exe.run(prog, feed=FEEDS, fetch_list=fetch)
        except Exception as e:  # noqa: BLE001 - what fluid refuses is the answer
            out[name] = {"error": type(e).__name__}
    save("intmath", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
