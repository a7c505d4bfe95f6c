"""Math ops through the op harness: forward vs numpy, gradients vs finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest
from op_harness import OpCase, check_op, rand, rand_away_from
from scipy.special import erf

from spmd.core import Program
from spmd.errors import InvalidArgumentError
from spmd.kernels.registry import run_kernel
from spmd.ops import get_op_def

CASES = [
    OpCase("mul", {"X": rand(4, 3), "Y": rand(3, 5)}, lambda X, Y, **a: {"Out": X @ Y}),
    OpCase("mul", {"X": rand(2, 3, 4), "Y": rand(12, 5)}, name="mul_flatten",
           attrs={"x_num_col_dims": 1},
           ref=lambda X, Y, **a: {"Out": X.reshape(2, 12) @ Y}),
    OpCase("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(3)}, attrs={"axis": 1},
           name="add_axis1", ref=lambda X, Y, axis: {"Out": X + Y.reshape(1, 3, 1)}),
    OpCase("elementwise_add", {"X": rand(2, 3), "Y": rand(2, 3)}, name="add_same",
           ref=lambda X, Y, **a: {"Out": X + Y}),
    OpCase("relu", {"X": rand_away_from(3, 4)}, lambda X: {"Out": np.maximum(X, 0)}),
    OpCase("mean", {"X": rand(3, 4)}, lambda X: {"Out": np.array([X.mean()])}),
    OpCase("sum", {"X": [rand(2, 3), rand(2, 3), rand(2, 3)]},
           lambda X: {"Out": X[0] + X[1] + X[2]}),
    OpCase("scale", {"X": rand(2, 3)}, attrs={"scale": 2.5, "bias": 0.5},
           ref=lambda X, scale, bias: {"Out": X * scale + bias}),
]

CASES += [
    OpCase("sum", {"X": [rand(2, 3)]}, name="sum_one", ref=lambda X: {"Out": X[0]}),
    OpCase("sum", {"X": [rand(2, 3), rand(2, 3)]}, name="sum_two",
           ref=lambda X: {"Out": X[0] + X[1]}),
]

# -- matmul: fluid's shapes (vectors as row/column matrices, a dropped 1, [1] for a scalar) ----

CASES += [
    OpCase("matmul", {"X": rand(3, 4), "Y": rand(4, 5)}, name="matmul_2d",
           ref=lambda X, Y, **a: {"Out": X @ Y}),
    OpCase("matmul", {"X": rand(4, 3), "Y": rand(5, 4)}, name="matmul_tx_ty_alpha",
           attrs={"transpose_X": True, "transpose_Y": True, "alpha": 2.0},
           ref=lambda X, Y, **a: {"Out": 2.0 * X.T @ Y.T}),
    OpCase("matmul", {"X": rand(3, 4), "Y": rand(5, 4)}, name="matmul_ty",
           attrs={"transpose_Y": True}, ref=lambda X, Y, **a: {"Out": X @ Y.T}),
    OpCase("matmul", {"X": rand(2, 3, 4), "Y": rand(2, 4, 2)}, name="matmul_batched",
           ref=lambda X, Y, **a: {"Out": np.einsum("bmk,bkn->bmn", X, Y)}),
    OpCase("matmul", {"X": rand(2, 3, 4), "Y": rand(4, 2)}, name="matmul_batch_x_bcast_y",
           ref=lambda X, Y, **a: {"Out": np.einsum("bmk,kn->bmn", X, Y)}),
    OpCase("matmul", {"X": rand(3, 4), "Y": rand(2, 4, 2)}, name="matmul_bcast_x_batch_y",
           ref=lambda X, Y, **a: {"Out": np.einsum("mk,bkn->bmn", X, Y)}),
    OpCase("matmul", {"X": rand(2, 4, 3), "Y": rand(4, 2)}, name="matmul_batch_tx_bcast_y",
           attrs={"transpose_X": True, "alpha": 0.5},
           ref=lambda X, Y, **a: {"Out": 0.5 * np.einsum("bkm,kn->bmn", X, Y)}),
    OpCase("matmul", {"X": rand(2, 2, 3, 2), "Y": rand(2, 2, 4, 2)}, name="matmul_4d_ty",
           attrs={"transpose_Y": True},
           ref=lambda X, Y, **a: {"Out": np.einsum("abmk,abnk->abmn", X, Y)}),
    OpCase("matmul", {"X": rand(4), "Y": rand(4)}, name="matmul_vec_vec",
           ref=lambda X, Y, **a: {"Out": np.array([X @ Y])}),
    OpCase("matmul", {"X": rand(4), "Y": rand(4, 3)}, name="matmul_vec_mat",
           ref=lambda X, Y, **a: {"Out": X @ Y}),
    OpCase("matmul", {"X": rand(2, 3, 4), "Y": rand(4)}, name="matmul_batch_vec",
           ref=lambda X, Y, **a: {"Out": np.einsum("bmk,k->bm", X, Y)}),
    OpCase("matmul", {"X": rand(4), "Y": rand(2, 4, 3)}, name="matmul_vec_batch",
           ref=lambda X, Y, **a: {"Out": np.einsum("k,bkn->bn", X, Y)}),
    OpCase("matmul", {"X": rand(3), "Y": rand(1, 2)}, name="matmul_vec_tx_outer",
           attrs={"transpose_X": True}, ref=lambda X, Y, **a: {"Out": np.outer(X, Y[0])}),
    OpCase("matmul", {"X": rand(2, 1), "Y": rand(3)}, name="matmul_vec_ty",
           attrs={"transpose_Y": True}, ref=lambda X, Y, **a: {"Out": np.outer(X[:, 0], Y)}),
]


# -- elementwise: fluid's axis rule, gradients of the broadcast operand -----------------------

def _aligned(X, Y, axis):
    """Y reshaped as fluid places it against X (the reference's own spelling of the rule)."""
    if axis == -1 or X.ndim == Y.ndim:
        return Y
    shape = [1] * X.ndim
    shape[axis: axis + Y.ndim] = Y.shape
    return Y.reshape(shape)


_BINARY = {
    "elementwise_sub": np.subtract, "elementwise_mul": np.multiply,
    "elementwise_div": np.divide, "elementwise_max": np.maximum, "elementwise_min": np.minimum,
}


def _binary_ref(fn):
    return lambda X, Y, axis=-1, **a: {"Out": fn(X, _aligned(X, Y, axis))}


def _away_from(values, *shape):
    """X values at least 0.15 from every Y value, so max/min never tie nor flip under FD."""
    return rand_away_from(*shape, points=tuple(np.ravel(values)), gap=0.1)


def _binary_cases(op):
    fn = _BINARY[op]
    short = op.split("_")[1]
    # Y away from 0 for div; for max/min, X away from every Y value
    y_same, y3, y4, y23 = (rand(2, 3, low=0.5, high=1.5), rand(3, low=0.5, high=1.5),
                           rand(4, low=0.5, high=1.5), rand(2, 3, low=0.5, high=1.5))
    y31, y24 = rand(3, 1, low=0.5, high=1.5), rand(2, 3, 4, low=0.5, high=1.5)
    if op in ("elementwise_max", "elementwise_min"):
        y_same, y3, y4 = np.array([[-0.6, 0.0, 0.6]] * 2), np.array([-0.5, 0.1, 0.7]), \
            np.array([-0.7, -0.2, 0.3, 0.8])
        y23, y31 = np.array([[-0.6, 0.0, 0.6], [-0.3, 0.3, 0.9]]), np.array([[-0.5], [0.1], [0.7]])
        y24 = np.linspace(-0.9, 0.9, 24).reshape(2, 3, 4)

    def x(*shape, ys):
        return _away_from(ys, *shape) if op in ("elementwise_max", "elementwise_min") \
            else rand(*shape)

    ref = _binary_ref(fn)
    return [
        OpCase(op, {"X": x(2, 3, ys=y_same), "Y": y_same}, ref, name=f"{short}_same"),
        OpCase(op, {"X": x(2, 3, 4, ys=y3), "Y": y3}, ref, attrs={"axis": 1},
               name=f"{short}_axis1"),
        OpCase(op, {"X": x(2, 3, 4, ys=y4), "Y": y4}, ref, name=f"{short}_trailing"),
        OpCase(op, {"X": x(2, 3, 4, ys=y23), "Y": y23}, ref, attrs={"axis": 0},
               name=f"{short}_axis0"),
        OpCase(op, {"X": x(2, 3, 4, ys=y31), "Y": y31}, ref, attrs={"axis": 1},
               name=f"{short}_axis1_y_ones"),
        OpCase(op, {"X": x(2, 1, 4, ys=y24), "Y": y24}, ref, name=f"{short}_x_broadcast"),
    ]


for _op in _BINARY:
    CASES += _binary_cases(_op)


# -- activations -------------------------------------------------------------------------------

def _gelu_tanh(X):
    return 0.5 * X * (1 + np.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X ** 3)))


CASES += [
    OpCase("leaky_relu", {"X": rand_away_from(3, 4)}, name="leaky_relu_default",
           ref=lambda X, **a: {"Out": np.where(X > 0, X, 0.02 * X)}),
    OpCase("leaky_relu", {"X": rand_away_from(2, 3, 2)}, attrs={"alpha": 0.3},
           ref=lambda X, alpha: {"Out": np.where(X > 0, X, alpha * X)}),
    OpCase("sigmoid", {"X": rand(3, 4, low=-4, high=4)},
           ref=lambda X: {"Out": 1 / (1 + np.exp(-X))}),
    OpCase("tanh", {"X": rand(3, 4, low=-2, high=2)}, ref=lambda X: {"Out": np.tanh(X)}),
    OpCase("gelu", {"X": rand(3, 4, low=-3, high=3)}, name="gelu_exact",
           ref=lambda X, **a: {"Out": 0.5 * X * (1 + erf(X / math.sqrt(2)))}),
    OpCase("gelu", {"X": rand(3, 4, low=-3, high=3)}, name="gelu_tanh",
           attrs={"approximate": True}, ref=lambda X, **a: {"Out": _gelu_tanh(X)}),
    OpCase("exp", {"X": rand(3, 4)}, ref=lambda X: {"Out": np.exp(X)}),
    OpCase("log", {"X": rand(3, 4, low=0.2, high=2)}, ref=lambda X: {"Out": np.log(X)}),
    OpCase("sqrt", {"X": rand(3, 4, low=0.2, high=2)}, ref=lambda X: {"Out": np.sqrt(X)}),
    OpCase("square", {"X": rand(3, 4)}, ref=lambda X: {"Out": X * X}),
    OpCase("pow", {"X": rand(3, 4, low=0.2, high=2)}, attrs={"factor": 2.5},
           ref=lambda X, factor: {"Out": X ** factor}),
    OpCase("pow", {"X": rand(3, 4, low=-2, high=2)}, name="pow_default",
           ref=lambda X, **a: {"Out": X.copy()}),
    OpCase("pow", {"X": rand(2, 3, low=0.2, high=2), "FactorTensor": np.array([3.0])},
           name="pow_factor_tensor", attrs={"factor": 7.0},
           ref=lambda X, FactorTensor, **a: {"Out": X ** 3.0}),
    OpCase("clip", {"X": rand_away_from(3, 4, points=(-0.3, 0.4))},
           attrs={"min": -0.3, "max": 0.4},
           ref=lambda X, min, max: {"Out": np.clip(X, min, max)}),
]


# -- reductions --------------------------------------------------------------------------------

_REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max}


def _reduce_ref(fn):
    def ref(X, dim=(0,), keep_dim=False, reduce_all=False):
        axes = None if reduce_all else tuple(dim)
        out = np.asarray(fn(X, axis=axes, keepdims=keep_dim))
        return {"Out": out.reshape(1) if out.ndim == 0 else out}

    return ref


def _reduce_cases(op):
    ref, short = _reduce_ref(_REDUCE[op]), op.split("_")[1]
    x = rand(2, 3, 4)  # distinct values: reduce_max never ties
    return [
        OpCase(op, {"X": x}, ref, name=f"{short}_default_dim0"),
        OpCase(op, {"X": x}, ref, attrs={"dim": [1], "keep_dim": True}, name=f"{short}_keep"),
        OpCase(op, {"X": x}, ref, attrs={"dim": [-1]}, name=f"{short}_negative"),
        OpCase(op, {"X": x}, ref, attrs={"dim": [0, 2]}, name=f"{short}_two_dims"),
        OpCase(op, {"X": x}, ref, attrs={"reduce_all": True}, name=f"{short}_all"),
        OpCase(op, {"X": x}, ref, attrs={"reduce_all": True, "keep_dim": True},
               name=f"{short}_all_keep"),
        OpCase(op, {"X": rand(3, 4)}, ref, attrs={"dim": [0, 1]}, name=f"{short}_every_dim"),
    ]


for _op in _REDUCE:
    CASES += _reduce_cases(_op)

CASES += [
    OpCase("squared_l2_norm", {"X": rand(3, 4)}, ref=lambda X: {"Out": np.array([np.sum(X * X)])}),
    OpCase("squared_l2_norm", {"X": rand(5)}, name="squared_l2_norm_1d",
           ref=lambda X: {"Out": np.array([np.sum(X * X)])}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


def test_every_math_op_is_covered():
    tested = {c.op for c in CASES}
    wanted = {"matmul", "elementwise_add", "leaky_relu", "sigmoid", "tanh", "gelu", "exp", "log",
              "sqrt", "square", "pow", "clip", "squared_l2_norm", *_BINARY, *_REDUCE}
    assert wanted <= tested, f"no OpCase for {sorted(wanted - tested)}"


# -- kernel contracts: inputs untouched, only wanted gradients computed ------------------------

def _kernel_inputs(case):
    ins = {s: [np.array(a) for a in v] if isinstance(v, list) else np.array(v)
           for s, v in case.inputs.items()}
    attrs = get_op_def(case.op).validate_attrs(dict(case.attrs), "test")
    return ins, attrs


def _snapshot(ins):
    return {s: [a.copy() for a in v] if isinstance(v, list) else v.copy() for s, v in ins.items()}


def _assert_unchanged(before, after, what):
    for s, v in before.items():
        for i, (b, a) in enumerate(zip(v if isinstance(v, list) else [v],
                                       after[s] if isinstance(v, list) else [after[s]])):
            np.testing.assert_array_equal(a, b, err_msg=f"{what} modified input {s}[{i}]")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_leave_inputs_alone(case):
    ins, attrs = _kernel_inputs(case)
    before = _snapshot(ins)
    res = run_kernel(case.op, np, ins, attrs, frozenset(["Out"]))
    _assert_unchanged(before, ins, case.op)
    opdef = get_op_def(case.op)
    if opdef.grad != "default":
        return
    gins = {s: v for s, v in ins.items()}
    gins["Out"] = res["Out"]
    gins["Out@GRAD"] = np.full_like(res["Out"], 0.5) + rand(*res["Out"].shape) * 0.1
    before = _snapshot(gins)
    grads = [s + "@GRAD" for s in ins if s not in opdef.no_grad_inputs]
    got = run_kernel(case.op + "_grad", np, gins, attrs, frozenset(grads))
    _assert_unchanged(before, gins, case.op + "_grad")
    for g in grads:
        slot = g[: -len("@GRAD")]
        assert got[g].shape == ins[slot].shape, f"{case}: {g} shape {got[g].shape}"
        assert got[g].flags.c_contiguous, f"{case}: {g} is not contiguous"
    if len(grads) == 2:  # asking for one gradient computes only that one
        for g in grads:
            only = run_kernel(case.op + "_grad", np, gins, attrs, frozenset([g]))
            assert set(only) == {g}, f"{case}: asked for {g}, got {sorted(only)}"
            np.testing.assert_allclose(only[g], got[g])


def test_add_grads_do_not_share_a_buffer():
    x, y = rand(2, 3), rand(2, 3)
    attrs = get_op_def("elementwise_add").validate_attrs({}, "test")
    dout = rand(2, 3)
    got = run_kernel("elementwise_add_grad", np, {"X": x, "Y": y, "Out@GRAD": dout}, attrs,
                                            frozenset(["X@GRAD", "Y@GRAD"]))
    assert not np.shares_memory(got["X@GRAD"], got["Y@GRAD"])


def test_float32_stays_float32():
    for op, ins in [("sigmoid", {"X": rand(2, 2)}), ("gelu", {"X": rand(2, 2)}),
                    ("reduce_sum", {"X": rand(2, 2)}), ("squared_l2_norm", {"X": rand(2, 2)}),
                    ("clip", {"X": rand(2, 2)}), ("pow", {"X": rand(2, 2, low=0.5)})]:
        attrs = {"min": -0.5, "max": 0.5} if op == "clip" else {}
        attrs = get_op_def(op).validate_attrs(attrs, "test")
        out = run_kernel(op, np, {s: a.astype(np.float32) for s, a in ins.items()}, attrs,
                             frozenset(["Out"]))["Out"]
        assert out.dtype == np.float32, f"{op}: float32 input gave {out.dtype}"


def test_reduce_sum_keeps_int_dtype():
    attrs = get_op_def("reduce_sum").validate_attrs({"dim": [1]}, "test")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = run_kernel("reduce_sum", np, {"X": x}, attrs, frozenset(["Out"]))["Out"]
    assert out.dtype == np.int32 and out.tolist() == [3, 12]


# -- shape inference: fluid's output shapes, user errors named --------------------------------

def _append(op, shapes, attrs=None, dtypes=None):
    prog = Program()
    block = prog.global_block()
    ins = {}
    for slot, shape in shapes.items():
        dtype = (dtypes or {}).get(slot, "float32")
        ins[slot] = block.create_var(name=slot.lower(), shape=shape, dtype=dtype)
    out = block.create_var(name="out")
    block.append_op(op, ins, {"Out": out}, attrs or {})
    return out


@pytest.mark.parametrize("x, y, attrs, want", [
    ((-1, 3, 4), (4, 5), {}, (-1, 3, 5)),
    ((3, 4), (-1, 4, 5), {}, (-1, 3, 5)),
    ((4,), (4,), {}, (1,)),
    ((4,), (4, 5), {}, (5,)),
    ((6, 3, 4), (4,), {}, (6, 3)),
    ((3,), (1, 5), {"transpose_X": True}, (3, 5)),
    ((2, 3, 5, 4), (2, 3, 4, 6), {}, (2, 3, 5, 6)),
    ((2, 3, 4, 5), (2, 3, 6, 4), {"transpose_X": True, "transpose_Y": True}, (2, 3, 5, 6)),
    ((-1, 4), (4, -1), {}, (-1, -1)),
])
def test_matmul_shapes(x, y, attrs, want):
    assert tuple(_append("matmul", {"X": x, "Y": y}, attrs).shape) == want


@pytest.mark.parametrize("op, shapes, attrs, dtypes, message", [
    ("matmul", {"X": (3, 4), "Y": (5, 6)}, {}, None, "inner sizes 4 and 5"),
    ("matmul", {"X": (3, 4), "Y": (4, 5)}, {"transpose_X": True}, None, "inner sizes 3 and 4"),
    ("matmul", {"X": (2, 3, 4), "Y": (3, 4, 5)}, {}, None, "hold 2 and 3 matrices"),
    ("matmul", {"X": (3, 4), "Y": (4, 5)}, {}, {"Y": "float64"}, "same dtype"),
    ("elementwise_mul", {"X": (2, 3, 4), "Y": (3,)}, {"axis": 2}, None, "does not match"),
    ("elementwise_sub", {"X": (2, 3, 4), "Y": (3, 4)}, {"axis": 2}, None, "does not place"),
    ("elementwise_div", {"X": (2, 3), "Y": (4, 3)}, {}, None, "do not broadcast"),
    ("elementwise_max", {"X": (2, 3), "Y": (3,)}, {}, {"Y": "int64"}, "same dtype"),
    ("reduce_sum", {"X": (2, 3)}, {"dim": [2]}, None, "out of range"),
    ("reduce_mean", {"X": (2, 3)}, {"dim": [-3]}, None, "out of range"),
    ("reduce_max", {"X": (2, 3)}, {"dim": [1, -1]}, None, "names an axis twice"),
    ("clip", {"X": (2, 3)}, {"min": 1.0, "max": 0.0}, None, "min <= max"),
    ("pow", {"X": (2, 3), "FactorTensor": (2,)}, {}, None, "must hold one value"),
])
def test_shape_errors_name_the_problem(op, shapes, attrs, dtypes, message):
    with pytest.raises(InvalidArgumentError, match=message):
        _append(op, shapes, attrs, dtypes)


def test_clip_needs_its_bounds():
    with pytest.raises(InvalidArgumentError, match="'min' is required"):
        _append("clip", {"X": (2, 3)}, {"max": 1.0})


@pytest.mark.parametrize("attrs, want", [
    ({}, (3, 4)),
    ({"dim": [1], "keep_dim": True}, (2, 1, 4)),
    ({"dim": [0, 1, 2]}, (1,)),
    ({"reduce_all": True}, (1,)),
    ({"reduce_all": True, "keep_dim": True}, (1, 1, 1)),
    ({"dim": [-1, 0]}, (3,)),
])
def test_reduce_shapes(attrs, want):
    assert tuple(_append("reduce_sum", {"X": (2, 3, 4)}, attrs).shape) == want


def test_matmul_kernel_names_a_batch_mismatch_hidden_by_unknown_dims():
    # shape inference cannot see it when both batch dims are -1; the kernel says what is wrong
    attrs = get_op_def("matmul").validate_attrs({}, "test")
    with pytest.raises(InvalidArgumentError, match="hold as many"):
        run_kernel("matmul", np, {"X": rand(2, 3, 4), "Y": rand(3, 4, 5)}, attrs,
                             frozenset(["Out"]))
