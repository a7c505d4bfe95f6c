"""Outputs of fluid 1.8's math, activation, logic, reduce and linalg layers (and Variable
operators) on fixed inputs, for tests/unit/test_layers_math.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_math.py

CASES maps a name to build(layers, vars) -> list of Variables to fetch; the test runs the
same build with spmd.fluid.layers on the same FEEDS.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(11)
FEEDS = {
    "x": R.uniform(-2, 2, (3, 4)).astype("float32"),
    "y": R.uniform(-2, 2, (3, 4)).astype("float32"),
    "p": R.uniform(0.5, 2, (3, 4)).astype("float32"),
    "u": R.uniform(-0.9, 0.9, (3, 4)).astype("float32"),
    # halves in a 4-vector: fluid 1.8 rounds them away from zero (std::round) on its scalar
    # path, but to even inside 8-wide AVX packets; spmd always rounds away from zero
    "h": np.array([7.5, -0.5, 2.5, -1.5], "float32"),
    "x4": R.uniform(-1, 1, (2, 3, 2, 2)).astype("float32"),
    "m": R.uniform(-1, 1, (2, 3, 3)).astype("float32"),
    "v": R.uniform(-1, 1, (4,)).astype("float32"),
    "b1": np.array([[True, False, True], [False, False, True]]),
    "b2": np.array([[True, True, False], [False, True, True]]),
    "i1": np.array([7, -7, 7, -7, 9], "int64"),
    "i2": np.array([2, 2, -2, -2, 4], "int64"),
    "one": np.array([3.0], "float32"),
    "bad": np.array([1.0, np.inf, np.nan], "float32"),
}


def _unary(names):
    return {n: lambda L, d, _n=n: [getattr(L, _n)(d["x"])] for n in names}


CASES = _unary(["abs", "atan", "ceil", "cos", "erf", "floor", "logsigmoid", "sin", "softplus",
                "softsign", "tanh_shrink", "hard_shrink", "softshrink", "thresholded_relu",
                "brelu", "elu", "hard_sigmoid", "hard_swish", "mish", "relu6", "selu",
                "soft_relu", "stanh", "swish", "sign", "cumsum"])
CASES.update({
    "inverse_trig": lambda L, d: [L.acos(d["u"]), L.asin(d["u"])],
    "positive_only": lambda L, d: [L.reciprocal(d["p"]), L.rsqrt(d["p"]), L.log1p(d["p"])],
    "round": lambda L, d: [L.round(d["h"]), L.round(d["x"])],
    "act_args": lambda L, d: [
        L.hard_shrink(d["x"], threshold=1.0), L.softshrink(d["x"], alpha=0.8),
        L.thresholded_relu(d["x"], threshold=0.3), L.brelu(d["x"], t_min=-1.0, t_max=1.0),
        L.elu(d["x"], alpha=0.3), L.hard_sigmoid(d["x"], slope=0.3, offset=0.4),
        L.hard_swish(d["x"], threshold=4.0, scale=5.0, offset=2.0), L.mish(d["x"], 1.0),
        L.relu6(d["x"], threshold=1.5), L.selu(d["x"], scale=1.2, alpha=1.5),
        L.soft_relu(d["x"], threshold=1.0), L.stanh(d["x"], scale_a=0.5, scale_b=2.0),
        L.swish(d["x"], beta=2.0)],
    "cumsum_args": lambda L, d: [L.cumsum(d["x"], axis=0), L.cumsum(d["x"], exclusive=True),
                                 L.cumsum(d["x"], axis=1, reverse=True, exclusive=True)],
    "prelu": lambda L, d: [L.prelu(d["x"], "all"), L.prelu(d["x4"], "channel"),
                           L.prelu(d["x4"], "element")],
    "log_softmax": lambda L, d: [L.log_softmax(d["x"]), L.log_softmax(d["x"], axis=0)],
    "logsumexp": lambda L, d: [L.logsumexp(d["x"]), L.logsumexp(d["x"], dim=1),
                               L.logsumexp(d["x"], dim=[0], keepdim=True)],
    "clamp": lambda L, d: [L.clamp(d["x"], min=-1.0, max=1.0), L.clamp(d["x"], max=0.5),
                           L.clamp(d["x"], min=0.2)],
    "elementwise_pow": lambda L, d: [L.elementwise_pow(d["p"], d["x"])],
    "elementwise_int": lambda L, d: [L.elementwise_floordiv(d["i1"], d["i2"]),
                                     L.elementwise_mod(d["i1"], d["i2"])],
    "elementwise_mod_float": lambda L, d: [L.elementwise_mod(d["x"], d["p"])],
    "elementwise_equal": lambda L, d: [L.elementwise_equal(d["x"], d["x"]),
                                       L.elementwise_equal(d["i1"], d["i2"])],
    "compare": lambda L, d: [L.less_than(d["x"], d["y"]), L.less_equal(d["x"], d["y"]),
                             L.greater_than(d["x"], d["y"]), L.greater_equal(d["x"], d["y"]),
                             L.equal(d["i1"], d["i2"]), L.not_equal(d["i1"], d["i2"]),
                             L.less_than(d["x"], d["y"], force_cpu=True)],
    "logical": lambda L, d: [L.logical_and(d["b1"], d["b2"]), L.logical_or(d["b1"], d["b2"]),
                             L.logical_xor(d["b1"], d["b2"]), L.logical_not(d["b1"])],
    "reduce_bool": lambda L, d: [L.reduce_all(d["b1"]), L.reduce_any(d["b1"], dim=1),
                                 L.reduce_all(d["b2"], dim=[0], keep_dim=True)],
    "reduce_min_prod": lambda L, d: [L.reduce_min(d["x"]), L.reduce_min(d["x"], dim=1),
                                     L.reduce_prod(d["p"]),
                                     L.reduce_prod(d["p"], dim=[0], keep_dim=True)],
    "addcmul": lambda L, d: [L.addcmul(d["x"], d["y"], d["p"], value=0.5)],
    "addmm": lambda L, d: [L.addmm(L.matmul(d["x"], d["y"], transpose_y=True), d["x"],
                                   L.t(d["y"]), alpha=2.0, beta=0.5)],
    "bmm_dot": lambda L, d: [L.bmm(d["m"], d["m"]), L.dot(d["x"], d["y"]),
                             L.dot(d["v"], d["v"])],
    "cross": lambda L, d: [L.cross(d["m"], d["m"] * 2.0 + 1.0),
                           L.cross(d["m"], d["m"] * 0.5 - 1.0, dim=2)],
    "dist": lambda L, d: [L.dist(d["x"], d["y"]), L.dist(d["x"], d["y"], p=1),
                          L.dist(d["x"], d["y"], p=float("inf")), L.dist(d["x"], d["y"], p=0)],
    "t": lambda L, d: [L.t(d["x"]), L.t(d["v"])],
    "kron_trace": lambda L, d: [L.kron(d["x"], d["p"]), L.trace(d["x"]),
                                L.trace(d["m"], offset=1, dim1=1, dim2=2)],
    "cos_sim": lambda L, d: [L.cos_sim(d["x"], d["y"])],
    "l2_normalize": lambda L, d: [L.l2_normalize(d["x"], axis=1),
                                  L.l2_normalize(d["v"], axis=0)],
    "sum_clip_by_norm": lambda L, d: [L.sum([d["x"], d["y"], d["p"]]), L.sum(d["x"]),
                                      L.clip_by_norm(d["x"], max_norm=1.0)],
    "allclose": lambda L, d: [L.allclose(d["x"], d["x"]), L.allclose(d["x"], d["y"])],
    "finite": lambda L, d: [L.isfinite(d["x"]), L.isfinite(d["bad"]), L.has_inf(d["bad"]),
                            L.has_nan(d["x"]), L.has_nan(d["bad"])],
    "increment": lambda L, d: [L.increment(d["one"], value=2.0, in_place=False)],
    "operators": lambda L, d: [d["x"] < d["y"], d["x"] >= 0.5, d["p"] ** d["x"],
                               2.0 ** d["x"], d["i1"] // d["i2"], d["i1"] % d["i2"],
                               d["x"] <= d["y"], d["x"] > 0.0],
})


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, build in sorted(CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in FEEDS.items()}
            fetch = build(fluid.layers, vs)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        out[name] = exe.run(prog, feed=FEEDS, fetch_list=fetch)
    save("math", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
