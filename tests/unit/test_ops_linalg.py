"""Linear-algebra ops (addmm, bmm, dot, cross, dist, kron, trace, cos_sim, norm) and the new
math ops (elementwise_pow/floordiv/mod, increment, reduce_min/prod, clip with Min/Max) through
the op harness: forward vs numpy, gradients vs finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand, rand_away_from


def _kept_norm(X, axis, eps):
    return np.sqrt((X * X).sum(axis=axis, keepdims=True) + eps)


def _cos(X, Y):
    x, y = X.reshape(X.shape[0], -1), Y.reshape(Y.shape[0], -1)
    xn = np.linalg.norm(x, axis=1, keepdims=True)
    yn = np.linalg.norm(y, axis=1, keepdims=True)
    return {"Out": (x * y).sum(1, keepdims=True) / (xn * yn), "XNorm": xn, "YNorm": yn}


def _dist(X, Y, p):
    z = np.abs(X - Y).reshape(-1)
    if p == 0:
        return {"Out": np.array([float((z != 0).sum())])}
    if np.isinf(p):
        return {"Out": np.array([z.max() if p > 0 else z.min()])}
    return {"Out": np.array([(z ** p).sum() ** (1 / p)])}


CASES = [
    OpCase("addmm", {"Input": rand(3, 2), "X": rand(3, 4), "Y": rand(4, 2)},
           attrs={"Alpha": 2.0, "Beta": 0.5},
           ref=lambda Input, X, Y, Alpha, Beta: {"Out": Beta * Input + Alpha * X @ Y}),
    OpCase("addmm", {"Input": rand(1, 2), "X": rand(3, 4), "Y": rand(4, 2)},
           name="addmm_broadcast_input",
           ref=lambda Input, X, Y, **a: {"Out": Input + X @ Y}),
    OpCase("bmm", {"X": rand(2, 3, 4), "Y": rand(2, 4, 2)},
           lambda X, Y: {"Out": np.matmul(X, Y)}),
    OpCase("dot", {"X": rand(4), "Y": rand(4)}, lambda X, Y: {"Out": np.array([X @ Y])}),
    OpCase("dot", {"X": rand(3, 4), "Y": rand(3, 4)}, name="dot_batch",
           ref=lambda X, Y: {"Out": (X * Y).sum(1, keepdims=True)}),
    OpCase("cross", {"X": rand(2, 3), "Y": rand(2, 3)},
           lambda X, Y, **a: {"Out": np.cross(X, Y, axis=1)}),
    OpCase("cross", {"X": rand(3, 3, 2), "Y": rand(3, 3, 2)}, attrs={"dim": 1},
           name="cross_dim1", ref=lambda X, Y, dim: {"Out": np.cross(X, Y, axis=1)}),
    OpCase("dist", {"X": rand(2, 3), "Y": rand(2, 3)}, attrs={"p": 2.0},
           ref=_dist),
    OpCase("dist", {"X": rand(2, 3), "Y": rand(3)}, attrs={"p": 3.0}, name="dist_p3_bcast",
           ref=_dist),
    OpCase("dist", {"X": rand(2, 3), "Y": rand(2, 3)}, attrs={"p": float("inf")},
           name="dist_inf", ref=_dist),
    OpCase("dist", {"X": rand(2, 3), "Y": rand(2, 3)}, attrs={"p": 0.0}, name="dist_p0",
           ref=_dist),
    OpCase("kron", {"X": rand(2, 3), "Y": rand(2, 2)}, lambda X, Y: {"Out": np.kron(X, Y)}),
    OpCase("kron", {"X": rand(2, 3), "Y": rand(2)}, name="kron_ranks",
           ref=lambda X, Y: {"Out": np.kron(X, Y)}),
    OpCase("trace", {"Input": rand(3, 4)}, attrs={"offset": 1},
           ref=lambda Input, offset, **a: {"Out": np.array([np.trace(Input, offset)])}),
    OpCase("trace", {"Input": rand(2, 3, 3)}, attrs={"dim1": 2, "dim2": 0, "offset": -1},
           name="trace_dims", ref=lambda Input, **a: {"Out": np.trace(Input, -1, 2, 0)}),
    OpCase("cos_sim", {"X": rand(3, 4), "Y": rand(3, 4)}, _cos,
           grad_outputs=["Out"]),
    OpCase("cos_sim", {"X": rand(3, 4), "Y": rand(1, 4)}, _cos, name="cos_sim_one_y",
           grad_outputs=["Out"]),
    OpCase("norm", {"X": rand(2, 3, 2)}, attrs={"axis": 1, "epsilon": 1e-10},
           ref=lambda X, axis, epsilon: {"Out": X / _kept_norm(X, axis, epsilon),
                                         "Norm": _kept_norm(X, axis, epsilon)},
           grad_outputs=["Out"]),
    OpCase("elementwise_pow", {"X": rand(2, 3, low=0.5, high=2.0), "Y": rand(3)},
           ref=lambda X, Y, **a: {"Out": X ** Y}),
    OpCase("reduce_min", {"X": rand(3, 4)}, attrs={"dim": [1]},
           ref=lambda X, **a: {"Out": X.min(axis=1)}),
    OpCase("reduce_prod", {"X": rand(2, 3)}, attrs={"dim": [0], "keep_dim": True},
           ref=lambda X, **a: {"Out": X.prod(axis=0, keepdims=True)}),
    OpCase("reduce_prod", {"X": rand(2, 3)}, attrs={"reduce_all": True}, name="prod_all",
           ref=lambda X, **a: {"Out": np.array([X.prod()])}),
    OpCase("reduce_prod", {"X": np.array([[0.0, 2.0, 3.0], [0.5, 0.0, 0.7]])},
           attrs={"dim": [1]}, name="prod_zero", ref=lambda X, **a: {"Out": X.prod(axis=1)}),
    OpCase("clip", {"X": rand_away_from(2, 3, points=(-0.2, 0.3)), "Min": np.array([-0.2]),
                    "Max": np.array([0.3])}, attrs={"min": -5.0, "max": 5.0},
           name="clip_tensor_bounds", ref=lambda X, **a: {"Out": np.clip(X, -0.2, 0.3)}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_linalg_op(case):
    check_op(case)


FWD_ONLY = [
    OpCase("elementwise_floordiv", {"X": np.array([7, -7, 7, -7]), "Y": np.array([2, 2, -2, -2])},
           ref=lambda X, Y, **a: {"Out": np.array([3, -3, -3, 3])}),
    OpCase("elementwise_mod", {"X": np.array([7, -7, 7, -7]), "Y": np.array([2, 2, -2, -2])},
           ref=lambda X, Y, **a: {"Out": np.array([1, -1, 1, -1])}),
    OpCase("elementwise_mod", {"X": np.array([7.5, -7.5, 2.5]), "Y": np.array([2.0, 2.0, -2.0])},
           name="mod_float", ref=lambda X, Y, **a: {"Out": np.array([1.5, 0.5, -1.5])}),
    OpCase("increment", {"X": np.array([3.0])}, attrs={"step": 2.0},
           ref=lambda X, step: {"Out": X + step}),
    OpCase("increment", {"X": np.array([3])}, name="increment_int",
           ref=lambda X, **a: {"Out": X + 1}),
]


@pytest.mark.parametrize("case", FWD_ONLY, ids=str)
def test_no_grad_math_op(case):
    check_forward(case, "float64")
