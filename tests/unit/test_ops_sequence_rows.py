"""The sequence ops that move, cut, pad or relabel rows (sequence_slice, sequence_pad /
sequence_unpad, sequence_mask, sequence_reshape, sequence_reverse, sequence_enumerate,
sequence_scatter, lod_reset / lod_append, sequence_concat) against numpy references, with
gradients against central finite differences (float64); empty sequences and two-level LoD
where the op takes them; and the errors a bad LoD or argument gets."""
from __future__ import annotations

import numpy as np
import pytest

import spmd
import spmd.fluid as fluid
from spmd.errors import ExecutionError, InvalidArgumentError
from tests.op_harness import OpCase, check_op, rand


def _spans(lengths):
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    return list(zip(off[:-1], off[1:]))


def _slice_ref(X, Offset, Length, lod, **_):
    parts = [X[a + o:a + o + n] for (a, _), o, n in zip(_spans(lod["X"][0]), Offset[:, 0],
                                                         Length[:, 0])]
    return {"Out": np.concatenate(parts)}


def _pad_ref(X, PadValue, lod, padded_length=-1, **_):
    lengths = lod["X"][0]
    width = max(lengths) if padded_length == -1 else padded_length
    out = np.empty((len(lengths), width) + X.shape[1:])
    out[...] = PadValue.reshape(X.shape[1:] if PadValue.size > 1 else ())
    for i, (a, b) in enumerate(_spans(lengths)):
        out[i, :b - a] = X[a:b]
    return {"Out": out, "Length": np.array(lengths, np.int64)}


def _unpad_ref(X, Length, **_):
    return {"Out": np.concatenate([X[i, :n] for i, n in enumerate(Length)])}


def _reshape_ref(X, lod, new_dim, **_):
    return {"Out": X.reshape(-1, new_dim)}


def _reverse_ref(X, lod, **_):
    return {"Y": np.concatenate([X[a:b][::-1] for a, b in _spans(lod["X"][0])])}


def _scatter_ref(X, Ids, Updates, lod, **_):
    out = X.copy()
    for i, (a, b) in enumerate(_spans(lod["Ids"][0])):
        for k in range(a, b):
            out[i, Ids[k, 0]] += Updates[k, 0]
    return {"Out": out}


def _identity(X, **_):
    return {"Out": X}


ROW_CASES = [
    OpCase("sequence_slice", {"X": rand(9, 2), "Offset": np.array([[0], [1], [1]]),
                              "Length": np.array([[2], [1], [3]])}, _slice_ref,
           lod={"X": [[3, 2, 4]]}, out_lod={"Out": [[2, 1, 3]]}, name="slice"),
    OpCase("sequence_slice", {"X": rand(5, 2), "Offset": np.array([[3], [0], [0]]),
                              "Length": np.array([[0], [0], [2]])}, _slice_ref,
           lod={"X": [[3, 0, 2]]}, out_lod={"Out": [[0, 0, 2]]}, name="slice_empty"),
    OpCase("sequence_pad", {"X": rand(6, 2), "PadValue": np.array([0.5])}, _pad_ref,
           lod={"X": [[2, 3, 1]]}, name="pad_scalar"),
    OpCase("sequence_pad", {"X": rand(5, 2, 3), "PadValue": rand(2, 3)}, _pad_ref,
           {"padded_length": 4}, lod={"X": [[2, 0, 3]]}, name="pad_rows_empty_sequence"),
    OpCase("sequence_unpad", {"X": rand(3, 4, 2), "Length": np.array([2, 4, 0])},
           _unpad_ref, out_lod={"Out": [[2, 4, 0]]}, name="unpad"),
    OpCase("sequence_unpad", {"X": rand(2, 3), "Length": np.array([1, 3])}, lambda X, Length:
           {"Out": np.concatenate([X[0, :1], X[1, :3]])[:, None]},
           out_lod={"Out": [[1, 3]]}, name="unpad_2d"),
    OpCase("sequence_reshape", {"X": rand(6, 2)}, _reshape_ref, {"new_dim": 4},
           lod={"X": [[2, 4]]}, out_lod={"Out": [[1, 2]]}, name="reshape_widen"),
    OpCase("sequence_reshape", {"X": rand(3, 4)}, _reshape_ref, {"new_dim": 2},
           lod={"X": [[1, 0, 2]]}, out_lod={"Out": [[2, 0, 4]]}, name="reshape_narrow"),
    OpCase("sequence_reverse", {"X": rand(6, 2)}, _reverse_ref, lod={"X": [[2, 0, 4]]},
           out_lod={"Y": [[2, 0, 4]]}, name="reverse"),
    OpCase("sequence_scatter", {"X": rand(3, 6), "Ids": np.array([[0], [1], [1], [5], [4]]),
                                "Updates": rand(5, 1)}, _scatter_ref,
           lod={"Ids": [[3, 0, 2]], "Updates": [[3, 0, 2]]}, name="scatter_repeated_id"),
    OpCase("lod_reset", {"X": rand(6, 2)}, _identity, {"target_lod": [0, 2, 6]},
           lod={"X": [[3, 3]]}, out_lod={"Out": [[2, 4]]}, name="lod_reset_target"),
    OpCase("lod_reset", {"X": rand(6, 2), "Y": np.array([0, 4, 4, 6])}, _identity,
           lod={"X": [[3, 3]]}, out_lod={"Out": [[4, 0, 2]]}, name="lod_reset_y_data"),
    OpCase("lod_reset", {"X": rand(6, 2), "Y": rand(6, 1)}, _identity,
           lod={"Y": [[1, 1], [2, 4]]}, out_lod={"Out": [[1, 1], [2, 4]]},
           name="lod_reset_y_lod_two_levels"),
    OpCase("lod_reset", {"X": rand(6, 2)}, _identity,
           {"target_lod": [0, 1, 1, 2, 4, 5, 6], "append": True}, lod={"X": [[2, 4]]},
           out_lod={"Out": [[2, 4], [1, 0, 1, 2, 1, 1]]}, name="lod_append"),
]


@pytest.mark.parametrize("case", ROW_CASES, ids=str)
def test_sequence_row_ops(case):
    check_op(case)


def _mask_ref(X, maxlen=-1, out_dtype="int64", **_):
    n = X.max() if maxlen == -1 else maxlen
    return {"Y": (np.arange(n) < X[..., None]).astype(out_dtype)}


def _enumerate_ref(X, lod, win_size, pad_value=0, **_):
    out = np.full((X.shape[0], win_size), pad_value, X.dtype)
    for a, b in _spans(lod["X"][0]):
        for t in range(a, b):
            for j in range(win_size):
                if t + j < b:
                    out[t, j] = X[t + j, 0]
    return {"Out": out}


INT_CASES = [
    OpCase("sequence_mask", {"X": np.array([3, 1, 0, 4])}, _mask_ref, {"maxlen": 5},
           name="mask"),
    OpCase("sequence_mask", {"X": np.array([[2, 0], [3, 1]])}, _mask_ref,
           {"out_dtype": "int32"}, name="mask_default_maxlen"),
    OpCase("sequence_enumerate", {"X": np.array([[3], [1], [4], [1], [5], [9], [2], [6]])},
           _enumerate_ref, {"win_size": 3, "pad_value": -1}, lod={"X": [[1, 0, 7]]},
           out_lod={"Out": [[1, 0, 7]]}, name="enumerate"),
    OpCase("sequence_reverse", {"X": np.arange(5).reshape(5, 1)}, _reverse_ref,
           lod={"X": [[3, 2]]}, name="reverse_int"),
]


@pytest.mark.parametrize("case", INT_CASES, ids=str)
def test_sequence_int_ops(case):
    check_op(case)


# -- sequence_concat: inputs with different LoD (the harness feeds one LoD per slot) -------------

def _concat_program(parts, dtype="float64"):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        xs = [fluid.data(f"x{i}", [-1, 2], dtype, lod_level=1) for i in range(len(parts))]
        for x in xs:
            x.stop_gradient = False
        out = fluid.layers.sequence_concat(xs)
        w = fluid.data("w", [-1, 2], dtype)
        loss = fluid.layers.reduce_sum(out * w)
        grads = fluid.gradients([loss], xs)
    feed = {f"x{i}": fluid.create_lod_tensor(a, [lengths], fluid.CPUPlace())
            for i, (a, lengths) in enumerate(parts)}
    return prog, out, loss, grads, feed


def test_sequence_concat_forward_and_finite_differences():
    parts = [(rand(6, 2), [2, 1, 3]), (rand(3, 2), [1, 2, 0]), (rand(1, 2), [0, 0, 1])]
    prog, out, loss, grads, feed = _concat_program(parts)
    want = []
    for k in range(3):
        for a, lengths in parts:
            a0, b0 = _spans(lengths)[k]
            want.append(a[a0:b0])
    want = np.concatenate(want)
    w = rand(*want.shape)
    exe = spmd.Executor(fluid.CPUPlace())
    got, *analytic = exe.run(prog, feed={**feed, "w": w}, fetch_list=[out] + grads,
                             return_numpy=False)
    np.testing.assert_allclose(np.array(got), want)
    assert got.recursive_sequence_lengths() == [[3, 3, 4]]
    eps = 1e-6
    for i, (a, lengths) in enumerate(parts):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(*a.shape):
            values = []
            for sign in (1, -1):
                b = a.copy()
                b[idx] += sign * eps
                f = dict(feed, w=w)
                f[f"x{i}"] = fluid.create_lod_tensor(b, [lengths], fluid.CPUPlace())
                values.append(float(np.asarray(exe.run(prog, feed=f, fetch_list=[loss])[0])
                                    .reshape(-1)[0]))
            numeric[idx] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(np.array(analytic[i]), numeric, rtol=1e-6, atol=1e-7)


def test_sequence_concat_needs_as_many_sequences_in_every_input():
    prog, out, _, _, feed = _concat_program([(rand(3, 2), [1, 2]), (rand(3, 2), [1, 1, 1])])
    with pytest.raises(ExecutionError, match="same number of sequences"):
        spmd.Executor(fluid.CPUPlace()).run(prog, feed={**feed, "w": rand(6, 2)},
                                            fetch_list=[out])


# -- errors ------------------------------------------------------------------------------------

def _run_layer(build, feed):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        out = build()
    exe = spmd.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=feed, fetch_list=[out], return_numpy=False)[0]


def _lod_x(lengths, width=2, dtype="float32"):
    return fluid.create_lod_tensor(np.ones((sum(lengths), width), dtype), [lengths],
                                   fluid.CPUPlace())


def test_sequence_op_on_a_tensor_without_lod_says_how_to_declare_it():
    with pytest.raises(InvalidArgumentError, match="lod_level=1"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.sequence_reverse(fluid.data("x", [-1, 2], "float32"))


def test_one_level_ops_refuse_two_levels():
    with pytest.raises(InvalidArgumentError, match="one level"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.sequence_conv(fluid.data("x", [-1, 2], "float32", lod_level=2), 2)


def test_pad_shorter_than_the_longest_sequence():
    def build():
        x = fluid.data("x", [-1, 2], "float32", lod_level=1)
        return fluid.layers.sequence_pad(x, fluid.layers.assign(np.zeros(1, "float32")),
                                         maxlen=2)[0]
    with pytest.raises(ExecutionError, match="padded_length 2 is shorter"):
        _run_layer(build, {"x": _lod_x([3, 1])})


def test_slice_past_the_end_of_a_sequence():
    def build():
        x = fluid.data("x", [-1, 2], "float32", lod_level=1)
        offset = fluid.layers.assign(np.array([[0], [1]], "int64"))
        length = fluid.layers.assign(np.array([[2], [2]], "int64"))
        return fluid.layers.sequence_slice(x, offset, length)
    with pytest.raises(ExecutionError, match="sequence 1 has 2 rows"):
        _run_layer(build, {"x": _lod_x([3, 2])})


def test_reshape_that_does_not_divide():
    def build():
        return fluid.layers.sequence_reshape(fluid.data("x", [-1, 2], "float32",
                                                        lod_level=1), 4)
    with pytest.raises(ExecutionError, match="multiple of new_dim 4"):
        _run_layer(build, {"x": _lod_x([3, 3])})


def test_lod_reset_to_a_lod_that_does_not_cover_the_rows():
    def build():
        return fluid.layers.lod_reset(fluid.data("x", [-1, 2], "float32"),
                                      target_lod=[0, 2, 5])
    with pytest.raises(ExecutionError, match="must cover the tensor's 6 rows"):
        _run_layer(build, {"x": np.ones((6, 2), "float32")})


def test_scatter_id_outside_the_row():
    def build():
        x = fluid.data("x", [-1, 3], "float32")
        ids = fluid.data("i", [-1, 1], "int64", lod_level=1)
        upd = fluid.data("u", [-1, 1], "float32", lod_level=1)
        return fluid.layers.sequence_scatter(x, ids, upd)
    place = fluid.CPUPlace()
    feed = {"x": np.zeros((2, 3), "float32"),
            "i": fluid.create_lod_tensor(np.array([[3], [0]], "int64"), [[1, 1]], place),
            "u": fluid.create_lod_tensor(np.ones((2, 1), "float32"), [[1, 1]], place)}
    with pytest.raises(ExecutionError, match="id 3, outside"):
        _run_layer(build, feed)


def test_expand_with_mismatched_sequences():
    def build():
        x = fluid.data("x", [-1, 2], "float32", lod_level=1)
        y = fluid.data("y", [-1, 1], "float32", lod_level=1)
        return fluid.layers.sequence_expand(x, y)
    feed = {"x": _lod_x([1, 1]), "y": _lod_x([1, 1, 1], width=1)}
    with pytest.raises(ExecutionError, match="X has 2 sequences but level 0"):
        _run_layer(build, feed)
