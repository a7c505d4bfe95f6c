"""Activation ops (fluid 1.8's ops.py / nn.py activations, cumsum, prelu) through the op
harness: forward vs numpy, gradients vs finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_op, rand, rand_away_from, run_forward
from scipy.special import erf, expit

from spmd.core import Program
from spmd.errors import InvalidArgumentError


def _softplus(x):
    return np.logaddexp(0.0, x)


def _c(op, ref, x=None, name="", **attrs):
    x = rand_away_from(2, 3) if x is None else x
    return OpCase(op, {"X": x}, lambda X, **a: {"Out": ref(X, **a)}, attrs=attrs,
                  name=name or op)


CASES = [
    _c("abs", lambda x: np.abs(x)),
    _c("acos", lambda x: np.arccos(x), rand(2, 3, low=-0.8, high=0.8)),
    _c("asin", lambda x: np.arcsin(x), rand(2, 3, low=-0.8, high=0.8)),
    _c("atan", lambda x: np.arctan(x)),
    _c("cos", lambda x: np.cos(x)),
    _c("sin", lambda x: np.sin(x)),
    _c("erf", lambda x: erf(x)),
    _c("logsigmoid", lambda x: np.log(expit(x))),
    _c("reciprocal", lambda x: 1.0 / x, rand(2, 3, low=0.5, high=2.0)),
    _c("rsqrt", lambda x: 1.0 / np.sqrt(x), rand(2, 3, low=0.5, high=2.0)),
    _c("softplus", _softplus),
    _c("softsign", lambda x: x / (1 + np.abs(x))),
    _c("tanh_shrink", lambda x: x - np.tanh(x)),
    _c("log1p", lambda x: np.log1p(x), rand(2, 3, low=0.0, high=2.0)),
    _c("ceil", lambda x: np.ceil(x), rand_away_from(2, 3, points=(-1.0, 0.0, 1.0),
                                                    low=-1.9, high=1.9) * 1.0),
    _c("floor", lambda x: np.floor(x), rand_away_from(2, 3, points=(-1.0, 0.0, 1.0),
                                                      low=-1.9, high=1.9)),
    _c("round", lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
       rand_away_from(2, 3, points=(-1.5, -0.5, 0.5, 1.5), low=-1.9, high=1.9)),
    _c("hard_shrink", lambda x, threshold: np.where(np.abs(x) > threshold, x, 0.0),
       rand_away_from(2, 3, points=(-0.3, 0.3)), threshold=0.3),
    _c("softshrink", lambda x, **a: np.where(x > 0.4, x - 0.4, np.where(x < -0.4, x + 0.4, 0)),
       rand_away_from(2, 3, points=(-0.4, 0.4)), **{"lambda": 0.4}),
    _c("thresholded_relu", lambda x, threshold: np.where(x > threshold, x, 0.0),
       rand_away_from(2, 3, points=(0.2,)), threshold=0.2),
    _c("brelu", lambda x, t_min, t_max: np.clip(x, t_min, t_max),
       rand_away_from(2, 3, points=(-0.5, 0.5)), t_min=-0.5, t_max=0.5),
    _c("elu", lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)), alpha=0.7),
    _c("hard_sigmoid", lambda x, slope, offset: np.clip(slope * x + offset, 0, 1),
       rand_away_from(3, 4, points=(-2.5, 2.5), low=-4, high=4), slope=0.2, offset=0.5),
    _c("hard_swish", lambda x, threshold, scale, offset:
       x * np.clip(x + offset, 0, threshold) / scale,
       rand_away_from(3, 4, points=(-3.0, 3.0), low=-5, high=5), threshold=6.0, scale=6.0,
       offset=3.0),
    _c("mish", lambda x, threshold: x * np.tanh(_softplus(x)), threshold=20.0),
    _c("mish", lambda x, threshold: x * np.tanh(np.where(
        x > threshold, x, np.where(x < -threshold, np.exp(x), _softplus(x)))),
       rand_away_from(3, 4, points=(-0.5, 0.5), low=-2, high=2), name="mish_thresholds",
       threshold=0.5),
    _c("relu6", lambda x, threshold: np.clip(x, 0, threshold),
       rand_away_from(2, 3, points=(0.0, 0.5)), threshold=0.5),
    _c("selu", lambda x, scale, alpha: scale * np.where(x > 0, x, alpha * np.expm1(x)),
       scale=1.05, alpha=1.67),
    _c("soft_relu", lambda x, threshold: np.log1p(np.exp(np.clip(x, -threshold, threshold))),
       rand_away_from(2, 3, points=(-0.5, 0.5)), threshold=0.5),
    _c("stanh", lambda x, scale_a, scale_b: scale_b * np.tanh(scale_a * x),
       scale_a=0.67, scale_b=1.7159),
    _c("swish", lambda x, beta: x * expit(beta * x), beta=1.5),
    OpCase("cumsum", {"X": rand(2, 4)}, lambda X, **a: {"Out": np.cumsum(X, axis=1)},
           attrs={"axis": 1}),
    OpCase("cumsum", {"X": rand(3, 2)}, name="cumsum_exclusive_reverse",
           attrs={"axis": 0, "exclusive": True, "reverse": True},
           ref=lambda X, **a: {"Out": np.flip(np.cumsum(np.flip(X, 0), 0), 0) - X}),
    OpCase("prelu", {"X": rand_away_from(2, 3, 2), "Alpha": np.array([0.3])},
           attrs={"mode": "all"}, name="prelu_all",
           ref=lambda X, Alpha, mode: {"Out": np.where(X > 0, X, 0.3 * X)}),
    OpCase("prelu", {"X": rand_away_from(2, 3, 2), "Alpha": rand(1, 3, 1, 1)},
           attrs={"mode": "channel"}, name="prelu_channel",
           ref=lambda X, Alpha, mode: {"Out": np.where(X > 0, X, Alpha.reshape(1, 3, 1) * X)}),
    OpCase("prelu", {"X": rand_away_from(2, 3, 2), "Alpha": rand(1, 3, 2)},
           attrs={"mode": "element"}, name="prelu_element",
           ref=lambda X, Alpha, mode: {"Out": np.where(X > 0, X, Alpha * X)}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_activation_op(case):
    check_op(case)


def test_round_halves_away_from_zero():
    case = _c("round", np.round, np.array([[0.5, -0.5, 1.5], [-2.5, 0.2, 1.7]]))
    got = run_forward(case)["Out"][0]
    np.testing.assert_array_equal(got, [[1.0, -1.0, 2.0], [-3.0, 0.0, 2.0]])


def test_bad_attrs_are_named():
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=[2, 3], dtype="float32")
    out = block.create_var(name="y")
    with pytest.raises(InvalidArgumentError, match="t_min"):
        block.append_op("brelu", {"X": [x]}, {"Out": [out]}, {"t_min": 2.0, "t_max": 1.0})
    with pytest.raises(InvalidArgumentError, match="mode"):
        alpha = block.create_var(name="a", shape=[1], dtype="float32")
        block.append_op("prelu", {"X": [x], "Alpha": [alpha]}, {"Out": [out]}, {"mode": "x"})
