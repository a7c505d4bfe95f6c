"""Tensor ops through the op harness (forward vs numpy, gradients vs finite differences), plus
shape inference with unknown (-1) dims, user errors, XShape and the random creation ops."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward, check_op, rand

import spmd
from spmd.autodiff import gradients
from spmd.core import CPUPlace, Program, Scope
from spmd.errors import ExecutionError, InvalidArgumentError

XS = {"Out": 1, "XShape": 1}  # reshape-family ops bind XShape; only Out is compared


def _split_ref(X, num=0, sections=(), axis=0, **_):
    if num:
        return {"Out": np.split(X, num, axis=axis)}
    sizes = list(sections)
    if -1 in sizes:
        sizes[sizes.index(-1)] = X.shape[axis] - sum(s for s in sizes if s != -1)
    return {"Out": np.split(X, np.cumsum(sizes)[:-1], axis=axis)}


def _one_hot_ref(X, depth, allow_out_of_range=False, **_):
    ids = X.reshape(-1)
    out = np.zeros((ids.size, depth))
    for row, i in enumerate(ids):
        if 0 <= i < depth:
            out[row, i] = 1
    return {"Out": out.reshape(X.shape[:-1] + (depth,))}


def _lookup_ref(W, Ids, padding_idx=-1, v2=False, **_):
    out = W[Ids.reshape(-1)].copy()
    out[Ids.reshape(-1) == padding_idx] = 0
    lead = Ids.shape if v2 else Ids.shape[:-1]
    return {"Out": out.reshape(lead + (W.shape[1],))}


IDS = np.array([[3], [0], [3], [1], [4]], dtype=np.int64)

CASES = [
    # copying and filling
    OpCase("assign", {"X": rand(2, 3)}, lambda X: {"Out": X}),
    OpCase("fill_any_like", {"X": rand(2, 3)}, attrs={"value": 2.5}, grad=[],
           ref=lambda X, value: {"Out": np.full_like(X, value)}),
    OpCase("fill_zeros_like", {"X": rand(3, 2)}, lambda X: {"Out": np.zeros_like(X)}, grad=[]),
    # cast
    OpCase("cast", {"X": rand(2, 3) * 10 + 0.5}, name="cast_to_int32", grad=[],
           attrs={"in_dtype": "float32", "out_dtype": "int32"},
           ref=lambda X, **a: {"Out": X.astype(np.int32)}),
    OpCase("cast", {"X": rand(2, 3)}, name="cast_f64", check_fp32=False,
           attrs={"in_dtype": "float64", "out_dtype": "float64"},
           ref=lambda X, **a: {"Out": X}),
    # reshaping
    OpCase("reshape2", {"X": rand(2, 3, 4)}, attrs={"shape": [0, -1]}, outputs=XS,
           name="reshape2_copy_infer", ref=lambda X, **a: {"Out": X.reshape(2, 12)}),
    OpCase("reshape2", {"X": rand(2, 3, 4)}, attrs={"shape": [4, 3, 2]}, outputs=XS,
           name="reshape2_explicit", ref=lambda X, **a: {"Out": X.reshape(4, 3, 2)}),
    OpCase("reshape2", {"X": rand(2, 3, 4)}, attrs={"shape": [-1, 2, 0]}, outputs=XS,
           name="reshape2_infer_first", ref=lambda X, **a: {"Out": X.reshape(3, 2, 4)}),
    OpCase("transpose2", {"X": rand(2, 3, 4)}, attrs={"axis": [1, 2, 0]}, outputs=XS,
           ref=lambda X, axis: {"Out": X.transpose(axis)}),
    OpCase("flatten2", {"X": rand(2, 3, 4)}, attrs={"axis": 2}, outputs=XS,
           ref=lambda X, axis: {"Out": X.reshape(6, 4)}),
    OpCase("flatten2", {"X": rand(2, 3, 2)}, attrs={"axis": 0}, outputs=XS, name="flatten2_0",
           ref=lambda X, axis: {"Out": X.reshape(1, 12)}),
    OpCase("squeeze2", {"X": rand(2, 1, 3, 1)}, attrs={"axes": [1, -1]}, outputs=XS,
           ref=lambda X, axes: {"Out": X.reshape(2, 3)}),
    OpCase("squeeze2", {"X": rand(1, 3, 1)}, attrs={"axes": [0, 1]}, outputs=XS,
           name="squeeze2_skips_non_1", ref=lambda X, axes: {"Out": X.reshape(3, 1)}),
    OpCase("squeeze2", {"X": rand(1, 3, 1)}, outputs=XS, name="squeeze2_all",
           ref=lambda X: {"Out": X.reshape(3)}),
    OpCase("unsqueeze2", {"X": rand(2, 3)}, attrs={"axes": [0, -1]}, outputs=XS,
           ref=lambda X, axes: {"Out": X.reshape(1, 2, 3, 1)}),
    OpCase("unsqueeze2", {"X": rand(2, 3)}, attrs={"axes": [1, 1]}, outputs=XS,
           name="unsqueeze2_twice", ref=lambda X, axes: {"Out": X.reshape(2, 1, 1, 3)}),
    # joining and cutting
    OpCase("concat", {"X": [rand(2, 1, 2), rand(2, 3, 2), rand(2, 2, 2)]}, attrs={"axis": 1},
           ref=lambda X, axis: {"Out": np.concatenate(X, axis=axis)}),
    OpCase("concat", {"X": [rand(2, 3), rand(2, 2)]}, attrs={"axis": -1}, name="concat_neg",
           ref=lambda X, axis: {"Out": np.concatenate(X, axis=axis)}),
    OpCase("split", {"X": rand(2, 6)}, attrs={"num": 3, "axis": 1}, ref=_split_ref),
    OpCase("split", {"X": rand(5, 2)}, attrs={"sections": [2, -1, 1], "axis": -2},
           name="split_sections", ref=_split_ref),
    OpCase("slice", {"Input": rand(3, 4, 5)},
           attrs={"axes": [0, 2], "starts": [-2, 1], "ends": [100, -1]},
           ref=lambda Input, **a: {"Out": Input[-2:100, :, 1:-1]}),
    OpCase("slice", {"Input": rand(3, 4, 2)}, name="slice_decrease",
           attrs={"axes": [1], "starts": [2], "ends": [3], "decrease_axis": [1]},
           ref=lambda Input, **a: {"Out": Input[:, 2, :]}),
    OpCase("slice", {"Input": rand(4, 3)}, name="slice_clamped",
           attrs={"axes": [0], "starts": [-10], "ends": [2], "infer_flags": [1]},
           ref=lambda Input, **a: {"Out": Input[-10:2]}),
    # indexing
    # a repeated index: only accumulate mode sums the gradients (finite differences); the
    # overwrite mode, fluid's default, is checked against fluid in test_layers_manip_oracle
    OpCase("gather", {"X": rand(5, 3), "Index": np.array([4, 0, 4, 2], dtype=np.int64)},
           attrs={"overwrite": False}, ref=lambda X, Index, **a: {"Out": X[Index]}),
    OpCase("gather", {"X": rand(5, 3), "Index": np.array([4, 0, 2], dtype=np.int64)},
           name="gather_overwrite", ref=lambda X, Index, **a: {"Out": X[Index]}),
    OpCase("gather", {"X": rand(4, 2, 2), "Index": np.array([[1], [3]], dtype=np.int32)},
           name="gather_n1", ref=lambda X, Index, **a: {"Out": X[Index.reshape(-1)]}),
    OpCase("one_hot", {"X": np.array([[2], [0], [3], [2]], dtype=np.int64)}, grad=[],
           attrs={"depth": 4, "dtype": "float64"}, ref=_one_hot_ref, check_fp32=False),
    OpCase("one_hot", {"X": np.array([[[1], [7]], [[-1], [0]]], dtype=np.int64)}, grad=[],
           name="one_hot_out_of_range",
           attrs={"depth": 3, "allow_out_of_range": True, "dtype": "float64"},
           ref=_one_hot_ref, check_fp32=False),
    OpCase("lookup_table", {"W": rand(5, 3), "Ids": IDS}, ref=_lookup_ref),
    OpCase("lookup_table", {"W": rand(5, 2), "Ids": IDS.reshape(1, 5, 1)}, name="lookup_pad",
           attrs={"padding_idx": 3, "is_sparse": True}, ref=_lookup_ref),
    OpCase("lookup_table_v2", {"W": rand(5, 2), "Ids": IDS.reshape(5)}, name="lookup_v2_pad",
           attrs={"padding_idx": 0}, ref=lambda **a: _lookup_ref(**a, v2=True)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_op(case):
    check_op(case)


# -- fill_constant: its dtype comes from the attribute, not the run -----------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_fill_constant(dtype):
    case = OpCase("fill_constant", {}, attrs={"shape": [2, 3], "value": 3.0, "dtype": dtype},
                  ref=lambda **a: {"Out": np.full((2, 3), 3.0, dtype=dtype)})
    got = check_forward_any(case)
    assert got.dtype == np.dtype(dtype)


def test_fill_constant_str_value():
    case = OpCase("fill_constant", {}, ref=lambda **a: {"Out": np.full([4], 1e-3)},
                  attrs={"shape": [4], "str_value": "0.001", "value": 7.0, "dtype": "float64"})
    check_forward(case, "float64")


def check_forward_any(case):
    """Forward of an op without float inputs; returns its Out."""
    prog, out = _program(case.op, {}, case.attrs)
    got = _run(prog, {}, out)
    np.testing.assert_allclose(got, case.ref(**case.attrs)["Out"])
    return got


def test_fill_any_like_dtype():
    prog, out = _program("fill_any_like", {"X": ("x", (-1, 3), "float32")},
                         {"value": 1.0, "dtype": "int64"})
    assert out.dtype == "int64" and out.shape == (-1, 3)
    got = _run(prog, {"x": np.zeros((2, 3), np.float32)}, out)
    np.testing.assert_array_equal(got, np.ones((2, 3), np.int64))


# -- helpers for programs built by hand ---------------------------------------------------------
def _program(op, inputs, attrs, outputs=("Out",), n_out=None):
    """A program with one op; inputs: slot -> (name, shape, dtype) or a list of them."""
    prog = Program()
    block = prog.global_block()
    ins = {}
    for slot, spec in inputs.items():
        specs = spec if isinstance(spec, list) else [spec]
        vs = [block.create_var(name=n, shape=s, dtype=d, is_data=True) for n, s, d in specs]
        ins[slot] = vs if isinstance(spec, list) else vs[0]
    outs = {s: [block.create_var(name=f"{s.lower()}_{i}") for i in range(
        (n_out or {}).get(s, 1))] for s in outputs}
    block.append_op(op, ins, outs, attrs)
    first = outs[outputs[0]]
    return prog, (first[0] if len(first) == 1 else first)


def _run(prog, feed, out):
    return spmd.Executor(CPUPlace()).run(prog, feed=feed, fetch_list=[out], scope=Scope())[0]


def _shape(op, inputs, attrs, outputs=("Out",), n_out=None):
    _, out = _program(op, inputs, attrs, outputs, n_out)
    return [v.shape for v in out] if isinstance(out, list) else out.shape


# -- shape inference with unknown dims -----------------------------------------------------------
def X(*shape, dtype="float32"):
    return ("x", shape, dtype)


@pytest.mark.parametrize("op, inputs, attrs, want", [
    ("reshape2", {"X": X(-1, 4, 6)}, {"shape": [0, -1]}, (-1, 24)),
    ("reshape2", {"X": X(-1, 4, 6)}, {"shape": [-1, 6]}, (-1, 6)),
    ("reshape2", {"X": X(-1, 4, 6)}, {"shape": [0, 2, -1, 3]}, (-1, 2, 4, 3)),
    ("reshape2", {"X": X(-1, 4, 6)}, {"shape": [4, -1]}, (4, -1)),
    ("reshape2", {"X": X(-1, 4), "Shape": ("s", (3,), "int32")}, {}, (-1, -1, -1)),
    ("transpose2", {"X": X(-1, 4, 6)}, {"axis": [2, 0, 1]}, (6, -1, 4)),
    ("flatten2", {"X": X(-1, 4, 6)}, {"axis": 1}, (-1, 24)),
    ("flatten2", {"X": X(-1, 4, 6)}, {"axis": 2}, (-1, 6)),
    ("squeeze2", {"X": X(-1, 1, 6)}, {"axes": [1]}, (-1, 6)),
    ("unsqueeze2", {"X": X(-1, 6)}, {"axes": [1]}, (-1, 1, 6)),
    ("concat", {"X": [X(-1, 4), ("y", (-1, 2), "float32")]}, {"axis": 1}, (-1, 6)),
    ("concat", {"X": [X(-1, 4), ("y", (3, 4), "float32")]}, {"axis": 0}, (-1, 4)),
    ("concat", {"X": [X(-1, 4), ("y", (3, 4), "float32")]}, {"axis": 1}, (3, 8)),
    ("slice", {"Input": X(-1, 8)}, {"axes": [0, 1], "starts": [0, 2], "ends": [1, -2]},
     (-1, 4)),
    ("slice", {"Input": X(-1, 8)}, {"axes": [1], "starts": [3], "ends": [4],
                                    "decrease_axis": [1]}, (-1,)),
    ("gather", {"X": X(10, 3), "Index": ("i", (-1,), "int64")}, {}, (-1, 3)),
    ("one_hot", {"X": X(-1, 1, dtype="int64")}, {"depth": 7}, (-1, 7)),
    ("lookup_table", {"W": X(10, 4), "Ids": ("i", (-1, 5, 1), "int64")}, {}, (-1, 5, 4)),
    ("lookup_table_v2", {"W": X(10, 4), "Ids": ("i", (-1, 5), "int64")}, {}, (-1, 5, 4)),
    ("cast", {"X": X(-1, 3)}, {"in_dtype": "float32", "out_dtype": "int64"}, (-1, 3)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_infer_unknown_dims(op, inputs, attrs, want):
    outputs = ("Out", "XShape") if op.endswith("2") and op != "lookup_table_v2" else ("Out",)
    assert _shape(op, inputs, attrs, outputs) == want


def test_infer_split_unknown_and_sections():
    assert _shape("split", {"X": X(-1, 6)}, {"num": 2}, n_out={"Out": 2}) == [(-1, 6)] * 2
    assert _shape("split", {"X": X(-1, 6)}, {"num": 3, "axis": 1},
                  n_out={"Out": 3}) == [(-1, 2)] * 3
    assert _shape("split", {"X": X(-1, 7)}, {"sections": [2, -1, 1], "axis": 1},
                  n_out={"Out": 3}) == [(-1, 2), (-1, 4), (-1, 1)]
    assert _shape("split", {"X": X(-1, 7)}, {"sections": [2, -1]},
                  n_out={"Out": 2}) == [(2, 7), (-1, 7)]


def test_xshape_and_dtypes():
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=(-1, 3, 4), dtype="float32", is_data=True)
    out, xs = block.create_var(name="out"), block.create_var(name="xs")
    block.append_op("reshape2", {"X": x}, {"Out": out, "XShape": xs}, {"shape": [0, 12]})
    assert xs.shape == (0, -1, 3, 4) and xs.dtype == "float32" and out.dtype == "float32"
    got_out, got_xs = spmd.Executor(CPUPlace()).run(
        prog, feed={"x": np.ones((2, 3, 4), np.float32)}, fetch_list=[out, xs], scope=Scope())
    assert got_out.shape == (2, 12) and got_xs.shape == (0, 2, 3, 4) and got_xs.size == 0
    prog2, o = _program("cast", {"X": X(2, 2)}, {"in_dtype": 5, "out_dtype": 6})
    assert o.dtype == "float64"  # fluid's VarType codes are accepted
    prog3, o = _program("one_hot", {"X": X(-1, 1, dtype="int64")},
                        {"depth": 3, "dtype": "float64"})
    assert o.dtype == "float64"


def test_reshape2_shape_input_wins_at_run_time():
    prog, out = _program("reshape2", {"X": X(-1, 4), "Shape": ("s", (2,), "int32")},
                         {"shape": [8, -1]}, outputs=("Out", "XShape"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = _run(prog, {"x": x, "s": np.array([4, -1], np.int32)}, out)
    np.testing.assert_array_equal(got, x.reshape(4, 2))


@pytest.mark.parametrize("op, attrs, ins", [
    ("reshape2", {"shape": [4, 3]}, {}),
    ("transpose2", {"axis": [0, 1]}, {}),
    ("flatten2", {"axis": 1}, {}),
    ("squeeze2", {"axes": []}, {}),
    ("unsqueeze2", {"axes": [0]}, {}),
    ("slice", {"axes": [0], "starts": [0], "ends": [3]}, {}),
    ("split", {"num": 1}, {}),
    ("cast", {"in_dtype": "float32", "out_dtype": "float32"}, {}),
    ("reshape2_grad", {"shape": [4, 3]}, {"XShape": np.empty((0, 3, 4), np.float32)}),
    ("transpose2_grad", {"axis": [0, 1]}, {"XShape": np.empty((0, 3, 4), np.float32)}),
    ("concat_grad", {"axis": 0}, {"X": [np.empty((3, 4), np.float32)]}),
])
def test_outputs_do_not_alias_inputs(op, attrs, ins):
    """Kernels hand back arrays of their own, so no later write can reach an input."""
    from spmd.kernels.registry import run_kernel
    from spmd.ops import get_op_def

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    opdef = get_op_def(op)
    slot = "Out@GRAD" if op.endswith("_grad") else next(iter(opdef.input_slots))
    full = opdef.validate_attrs(attrs, op)
    res = run_kernel(op, np, {slot: x, **ins}, full, frozenset(opdef.output_slots))
    for arrays in res.values():
        for a in arrays if isinstance(arrays, list) else [arrays]:
            assert not np.shares_memory(a, x), f"{op} output aliases its input"


# -- user errors: named, with expected vs got, at append_op time ---------------------------------
@pytest.mark.parametrize("op, inputs, attrs, match", [
    ("reshape2", {"X": X(2, 3)}, {"shape": [4, -1]}, "do not divide"),
    ("reshape2", {"X": X(2, 3)}, {"shape": [5]}, r"6 elements\) to \[5\]"),
    ("reshape2", {"X": X(2, 3)}, {"shape": [-1, -1]}, "at most one -1"),
    ("reshape2", {"X": X(2, 3)}, {"shape": [0, 0, 0]}, "X has rank 2"),
    ("transpose2", {"X": X(2, 3)}, {"axis": [0, 0]}, "permutation of 0..1"),
    ("flatten2", {"X": X(2, 3)}, {"axis": 3}, r"in \[0, 2\]"),
    ("squeeze2", {"X": X(2, 1)}, {"axes": [2]}, r"expected an axis in \[-2, 1\]"),
    ("unsqueeze2", {"X": X(2, 1)}, {"axes": [4]}, "out of range"),
    ("concat", {"X": [X(2, 3), ("y", (3, 3), "float32")]}, {"axis": 1}, "differ in dim 0"),
    ("concat", {"X": [X(2, 3), ("y", (2, 3, 1), "float32")]}, {}, "differ in rank"),
    ("slice", {"Input": X(4, 3)}, {"axes": [0], "starts": [3], "ends": [1]}, "is empty"),
    ("slice", {"Input": X(4, 3)}, {"axes": [2], "starts": [0], "ends": [1]}, "out of range"),
    ("slice", {"Input": X(4, 3)}, {"axes": [0], "starts": [0], "ends": [2],
                                   "decrease_axis": [0]}, "sliced to size 1"),
    ("gather", {"X": X(4, 3), "Index": ("i", (2,), "float32")}, {}, "integer ids"),
    ("gather", {"X": X(4, 3), "Index": ("i", (2, 2), "int64")}, {}, r"\[N, 1\]"),
    ("one_hot", {"X": X(4, 1, dtype="int64")}, {}, "'depth' must be > 0"),
    ("one_hot", {"X": X(4, dtype="int64")}, {"depth": 3}, "last dim 1"),
    ("lookup_table", {"W": X(5, 2), "Ids": ("i", (4,), "int64")}, {}, "end in a dim of 1"),
    ("lookup_table", {"W": X(5, 2), "Ids": ("i", (4, 1), "int64")}, {"padding_idx": 5},
     r"\[0, 4\]"),
    ("lookup_table_v2", {"W": X(5), "Ids": ("i", (4,), "int64")}, {}, "2-D table"),
])
def test_user_errors(op, inputs, attrs, match):
    outputs = ("Out", "XShape") if op in ("reshape2", "transpose2", "flatten2", "squeeze2",
                                          "unsqueeze2") else ("Out",)
    with pytest.raises(InvalidArgumentError, match=match):
        _program(op, inputs, attrs, outputs)


def test_split_errors():
    with pytest.raises(InvalidArgumentError, match="not divisible by num=4"):
        _program("split", {"X": X(6, 2)}, {"num": 4}, n_out={"Out": 4})
    with pytest.raises(InvalidArgumentError, match="add up to 5, but the split axis has size 6"):
        _program("split", {"X": X(6, 2)}, {"sections": [2, 3]}, n_out={"Out": 2})
    with pytest.raises(InvalidArgumentError, match="but Out has 3 variables"):
        _program("split", {"X": X(6, 2)}, {"sections": [2, 4]}, n_out={"Out": 3})
    with pytest.raises(InvalidArgumentError, match="either num > 0 or sections"):
        _program("split", {"X": X(6, 2)}, {"num": 2, "sections": [2, 4]}, n_out={"Out": 2})


def test_index_out_of_range_at_run_time():
    prog, out = _program("gather", {"X": X(4, 3), "Index": ("i", (-1,), "int64")}, {})
    with pytest.raises(ExecutionError, match=r"id 4, outside the valid range \[0, 3\]"):
        _run(prog, {"x": np.zeros((4, 3), np.float32), "i": np.array([0, 4])}, out)
    prog, out = _program("lookup_table", {"W": X(4, 3), "Ids": ("i", (-1, 1), "int64")}, {})
    with pytest.raises(ExecutionError, match="id -1, outside"):
        _run(prog, {"x": np.zeros((4, 3), np.float32), "i": np.array([[0], [-1]])}, out)
    prog, out = _program("one_hot", {"X": X(-1, 1, dtype="int64")}, {"depth": 2})
    with pytest.raises(ExecutionError, match="allow_out_of_range"):
        _run(prog, {"x": np.array([[0], [2]])}, out)


def test_unknown_trailing_dim_checked_at_run_time():
    prog, out = _program("lookup_table", {"W": X(4, 3), "Ids": ("i", (-1, -1), "int64")}, {})
    assert out.shape == (-1, 3)
    with pytest.raises(ExecutionError, match=r"must end in a dim of 1 .* got shape \[2, 2\]"):
        _run(prog, {"x": np.zeros((4, 3), np.float32), "i": np.zeros((2, 2), np.int64)}, out)
    prog, out = _program("one_hot", {"X": X(-1, -1, dtype="int64")}, {"depth": 2})
    with pytest.raises(ExecutionError, match="one_hot: X must end in a dim of 1"):
        _run(prog, {"x": np.zeros((2, 3), np.int64)}, out)


# -- gradients the harness does not cover --------------------------------------------------------
def test_cast_grad_casts_back():
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=(2, 3), dtype="float32", is_data=True,
                         stop_gradient=False)
    out = block.create_var(name="out")
    block.append_op("cast", {"X": x}, {"Out": out}, {"in_dtype": "float32",
                                                     "out_dtype": "float64"})
    w = block.create_var(name="w", shape=(2, 3), dtype="float64", is_data=True)
    (dx,) = gradients([out], [x], target_gradients=[w])
    assert dx.dtype == "float32"
    wv = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    got = spmd.Executor(CPUPlace()).run(prog, feed={"x": np.ones((2, 3), np.float32), "w": wv},
                                        fetch_list=[dx], scope=Scope())[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, wv.astype(np.float32))


def test_split_grad_with_unused_output():
    prog = Program()
    block = prog.global_block()
    x = block.create_var(name="x", shape=(4, 3), dtype="float64", is_data=True,
                         stop_gradient=False)
    outs = [block.create_var(name=f"o{i}") for i in range(2)]
    block.append_op("split", {"X": x}, {"Out": outs}, {"sections": [1, 3]})
    (dx,) = gradients([outs[1]], [x])  # only the second piece reaches the target
    got = spmd.Executor(CPUPlace()).run(prog, feed={"x": rand(4, 3)}, fetch_list=[dx],
                                        scope=Scope())[0]
    np.testing.assert_array_equal(got, np.r_[np.zeros((1, 3)), np.ones((3, 3))])


def test_lookup_grad_accumulates_repeats_and_skips_padding():
    prog = Program()
    block = prog.global_block()
    w = block.create_var(name="w", shape=(4, 2), dtype="float64", is_data=True,
                         stop_gradient=False)
    ids = block.create_var(name="ids", shape=(-1, 1), dtype="int64", is_data=True)
    out = block.create_var(name="out")
    block.append_op("lookup_table", {"W": w, "Ids": ids}, {"Out": out}, {"padding_idx": 2})
    (dw,) = gradients([out], [w])
    got = spmd.Executor(CPUPlace()).run(
        prog, feed={"w": rand(4, 2), "ids": np.array([[1], [2], [1], [1], [0]])},
        fetch_list=[dw], scope=Scope())[0]
    np.testing.assert_array_equal(got, [[1, 1], [3, 3], [0, 0], [0, 0]])


# -- random creation ----------------------------------------------------------------------------
def _draw(op, shape, seed=0, program_seed=0, **attrs):
    prog, out = _program(op, {}, {"shape": list(shape), "seed": seed, **attrs})
    prog.random_seed = program_seed
    return _run(prog, {}, out)


RANDOM_OPS = ["uniform_random", "gaussian_random", "truncated_gaussian_random"]


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_random_seed_repeats(op):
    a, b = _draw(op, (3, 4), seed=7), _draw(op, (3, 4), seed=7)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert not np.array_equal(a, _draw(op, (3, 4), seed=8))
    # the program's generator: same program seed, same values; later runs draw new ones
    prog, out = _program(op, {}, {"shape": [5]})
    prog.random_seed = 3
    exe = spmd.Executor(CPUPlace())
    first, second = (exe.run(prog, fetch_list=[out], scope=Scope())[0] for _ in range(2))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, _draw(op, (5,), program_seed=3))


def test_uniform_random_range_and_moments():
    v = _draw("uniform_random", (20000,), seed=1, min=-2.0, max=3.0, dtype="float64")
    assert v.dtype == np.float64 and v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.05 and abs(v.var() - 25 / 12) < 0.1


def test_uniform_random_diag():
    v = _draw("uniform_random", (3, 4), seed=1, diag_num=3, diag_step=4, diag_val=9.0)
    assert v.reshape(-1)[[0, 5, 10]].tolist() == [9.0] * 3
    with pytest.raises(InvalidArgumentError, match="outside the 12 elements"):
        _draw("uniform_random", (3, 4), diag_num=3, diag_step=5)


def test_gaussian_random_moments():
    v = _draw("gaussian_random", (20000,), seed=2, mean=1.0, std=2.0)
    assert abs(v.mean() - 1.0) < 0.06 and abs(v.std() - 2.0) < 0.06


def test_truncated_gaussian_random_range_and_moments():
    v = _draw("truncated_gaussian_random", (20000,), seed=3, mean=-1.0, std=0.5)
    assert v.min() >= -2.0 and v.max() <= 0.0  # mean -+ 2 std
    # a normal truncated at 2 std keeps std * 0.8796 of its spread
    assert abs(v.mean() + 1.0) < 0.02 and abs(v.std() - 0.5 * 0.8796) < 0.02


def test_random_errors():
    with pytest.raises(InvalidArgumentError, match="at least one dimension"):
        _draw("gaussian_random", ())
    with pytest.raises(InvalidArgumentError, match=r"sizes >= 0, got \[2, -1\]"):
        _draw("uniform_random", (2, -1))
    with pytest.raises(InvalidArgumentError, match="min must not exceed max"):
        _draw("uniform_random", (2,), min=1.0, max=0.0)
