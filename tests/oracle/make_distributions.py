"""Store fluid 1.8.5's fluid.layers distributions (Uniform, Normal, Categorical,
MultivariateNormalDiag): entropy, log_prob and kl_divergence from Variable and numpy
parameters, for tests/unit/test_fluid_distributions.py. Run with PaddlePaddle 1.8.5 outside
the checkout."""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

rng = np.random.RandomState(5)
FEED = {
    "loc": rng.uniform(-1, 1, (3, 4)).astype("float32"),
    "scale": rng.uniform(0.5, 2, (3, 4)).astype("float32"),
    "loc2": rng.uniform(-1, 1, (3, 4)).astype("float32"),
    "scale2": rng.uniform(0.5, 2, (3, 4)).astype("float32"),
    "value": rng.uniform(-1, 3, (3, 4)).astype("float32"),
    "logits": rng.uniform(-2, 2, (3, 5)).astype("float32"),
    "logits2": rng.uniform(-2, 2, (3, 5)).astype("float32"),
}
MVN_LOC = rng.uniform(-1, 1, (3,)).astype("float32")
MVN_SCALE = np.diag(rng.uniform(0.5, 2, 3)).astype("float32")
MVN_LOC2 = rng.uniform(-1, 1, (3,)).astype("float32")
MVN_SCALE2 = np.diag(rng.uniform(0.5, 2, 3)).astype("float32")
NP_LOW, NP_HIGH = [-1.0, 0.5], [2.0, 3.0]


def build(L):
    v = {k: fluid.data(k, list(a.shape), "float32") for k, a in FEED.items()}
    normal = L.Normal(v["loc"], v["scale"])
    other = L.Normal(v["loc2"], v["scale2"])
    uniform = L.Uniform(v["loc"], v["loc"] + v["scale"])
    cat = L.Categorical(v["logits"])
    cat2 = L.Categorical(v["logits2"])
    mvn = L.MultivariateNormalDiag(MVN_LOC, MVN_SCALE)
    mvn2 = L.MultivariateNormalDiag(MVN_LOC2, MVN_SCALE2)
    np_uniform = L.Uniform(np.array(NP_LOW, "float32"), np.array(NP_HIGH, "float32"))
    np_normal = L.Normal(0.5, 2.0)
    return {
        "normal_entropy": normal.entropy(), "normal_log_prob": normal.log_prob(v["value"]),
        "normal_kl": normal.kl_divergence(other),
        "uniform_entropy": uniform.entropy(), "uniform_log_prob": uniform.log_prob(v["value"]),
        "categorical_entropy": cat.entropy(), "categorical_kl": cat.kl_divergence(cat2),
        "mvn_entropy": mvn.entropy(), "mvn_kl": mvn.kl_divergence(mvn2),
        "np_uniform_entropy": np_uniform.entropy(),
        "np_normal_log_prob": np_normal.log_prob(v["value"]),
    }


if __name__ == "__main__":
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build(fluid.layers)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    names = sorted(outs)
    got = exe.run(main, feed=FEED, fetch_list=[outs[n] for n in names])
    save("distributions", {n: g for n, g in zip(names, got)}, meta={"paddle": paddle.__version__})
