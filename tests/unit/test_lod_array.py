"""The LoD tensor-array ops (lod_rank_table, max_sequence_len, lod_tensor_to_array,
array_to_lod_tensor, shrink_memory, reorder_lod_tensor_by_rank): forward against numpy
references built sequence by sequence (one and two LoD levels, ties, empty sequences),
gradients against central finite differences in float64, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError
from spmd.kernels.registry import run_kernel

cf = fluid.layers.control_flow
L = fluid.layers
RNG = np.random.default_rng(7)
PLACE = fluid.CPUPlace()


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(int)


def _rank(lengths):
    return np.argsort(-np.asarray(lengths), kind="stable")


def _run(build, feeds, fetch_lod=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fetches = build()
    exe = fluid.Executor(PLACE)
    got = exe.run(main, feed=feeds, fetch_list=fetches, scope=fluid.Scope(),
                  return_numpy=not fetch_lod)
    return got


def _lod_feed(value, lens):
    return fluid.create_lod_tensor(value, lens, PLACE)


def test_rank_table_items_are_stable_longest_first():
    lod = (np.array([0, 2, 5, 5, 8, 9]),)
    table = run_kernel("lod_rank_table", np, {"X": np.zeros((9, 1)), "X@LOD": lod},
                       {"level": 0}, {"Out"})["Out"]
    assert table.items() == [(1, 3), (3, 3), (0, 2), (4, 1), (2, 0)]
    assert run_kernel("max_sequence_len", np, {"RankTable": table}, {}, {"Out"})[
        "Out"].tolist() == [3]


def test_a_fetched_rank_table_is_its_items():
    def build():
        return [cf.lod_rank_table(fluid.data("x", [None, 1], "float32", lod_level=1))]

    got, = _run(build, {"x": _lod_feed(np.zeros((6, 1), "float32"), [[2, 3, 1]])})
    assert np.asarray(got).tolist() == [[1, 3], [0, 2], [2, 1]]


@pytest.mark.parametrize("lens", [[2, 4, 1, 4], [3], [1, 1, 1], [2, 0, 3]])
def test_lod_tensor_to_array_and_back(lens):
    x = RNG.uniform(-1, 1, (sum(lens), 3))
    offsets, order = _offsets(lens), _rank(lens)
    steps = max(lens)

    def build():
        v = fluid.data("x", [None, 3], "float64", lod_level=1)
        table = cf.lod_rank_table(v)
        arr = cf.lod_tensor_to_array(v, table)
        reads = [L.array_read(arr, L.fill_constant([1], "int64", t)) for t in range(steps)]
        return [cf.max_sequence_len(table), cf.array_to_lod_tensor(arr, table)] + reads

    got = _run(build, {"x": _lod_feed(x, [lens])}, fetch_lod=True)
    assert np.array(got[0]).tolist() == [steps]
    np.testing.assert_array_equal(np.array(got[1]), x)
    assert got[1].recursive_sequence_lengths() == [lens]
    for t in range(steps):
        running = [i for i in order if lens[i] > t]
        np.testing.assert_array_equal(np.array(got[2 + t]), x[offsets[running] + t])


def _sequences(x, lod):
    """Nested python lists of x's rows by a two-level LoD of lengths."""
    rows = _offsets(lod[1])
    out, k = [], 0
    for n in lod[0]:
        out.append([x[rows[j]:rows[j + 1]] for j in range(k, k + n)])
        k += n
    return out


@pytest.mark.parametrize("level", [0, 1])
def test_two_levels_split_at_either_level(level):
    lod = [[2, 1, 2], [1, 3, 2, 2, 1]]
    x = RNG.uniform(-1, 1, (9, 2))
    paragraphs = _sequences(x, lod)

    def build():
        v = fluid.data("x", [None, 2], "float64", lod_level=2)
        table = cf.lod_rank_table(v, level=level)
        arr = cf.lod_tensor_to_array(v, table)
        return [cf.array_to_lod_tensor(arr, table), L.reorder_lod_tensor_by_rank(v, table)
                if level == 0 else cf.max_sequence_len(table)]

    back, other = _run(build, {"x": _lod_feed(x, lod)}, fetch_lod=True)
    np.testing.assert_array_equal(np.array(back), x)
    assert back.recursive_sequence_lengths() == lod
    if level == 0:
        order = _rank(lod[0])
        want = [s for i in order for s in paragraphs[i]]
        np.testing.assert_array_equal(np.array(other), np.concatenate(want))
        assert other.recursive_sequence_lengths() == [
            [lod[0][i] for i in order], [len(s) for s in want]]
    else:
        assert np.array(other).tolist() == [3]


def test_array_elements_keep_the_level_below():
    """Split at level 0 of a two-level tensor, element t holds sentence t of every paragraph
    still running, each with its words (the LoD the elements carry)."""
    lod = [[2, 1, 3], [1, 3, 2, 1, 1, 2]]
    x = RNG.uniform(-1, 1, (10, 2))
    table = run_kernel("lod_rank_table", np, {"X": x, "X@LOD": tuple(
        np.array(o) for o in (_offsets(lod[0]), _offsets(lod[1])))}, {"level": 0}, {"Out"})
    lod_rt = tuple(np.array(o) for o in (_offsets(lod[0]), _offsets(lod[1])))
    res = run_kernel("lod_tensor_to_array", np,
                     {"X": x, "X@LOD": lod_rt, "RankTable": table["Out"]}, {}, {"Out"})
    paragraphs = _sequences(x, lod)
    order = _rank(lod[0])
    for t, (elem, elem_lod) in enumerate(zip(res["Out"], res["Out@LOD"])):
        sentences = [paragraphs[i][t] for i in order if lod[0][i] > t]
        np.testing.assert_array_equal(elem, np.concatenate(sentences))
        assert np.diff(elem_lod[0]).tolist() == [len(s) for s in sentences]


@pytest.mark.parametrize("with_lod", [True, False])
def test_reorder_and_shrink(with_lod):
    x_lens = [2, 4, 1, 4]
    y_lens = [1, 3, 2, 2] if with_lod else [1, 1, 1, 1]
    y = RNG.uniform(-1, 1, (sum(y_lens), 2))
    order = _rank(x_lens)
    ys = [y[a:b] for a, b in zip(_offsets(y_lens)[:-1], _offsets(y_lens)[1:])]

    def build():
        x = fluid.data("x", [None, 1], "float64", lod_level=1)
        v = fluid.data("y", [None, 2], "float64", lod_level=1 if with_lod else 0)
        table = cf.lod_rank_table(x)
        r = L.reorder_lod_tensor_by_rank(v, table)
        return [r] + [cf.shrink_memory(r, L.fill_constant([1], "int64", t), table)
                      for t in range(5)]

    feeds = {"x": _lod_feed(np.zeros((11, 1)), [x_lens]),
             "y": _lod_feed(y, [y_lens]) if with_lod else y}
    got = _run(build, feeds, fetch_lod=True)
    np.testing.assert_array_equal(np.array(got[0]), np.concatenate([ys[i] for i in order]))
    for t in range(5):
        keep = [i for i in order if x_lens[i] > t]
        want = np.concatenate([ys[i] for i in keep]) if keep else np.zeros((0, 2))
        np.testing.assert_array_equal(np.array(got[1 + t]), want)
        if with_lod:
            assert got[1 + t].recursive_sequence_lengths() == ([[y_lens[i] for i in keep]]
                                                               if keep else [[]])


# -- gradients ---------------------------------------------------------------------------------

def _check_grads(build, feeds: dict, lods: dict, wrt: list, eps=1e-6):
    """build(vars) -> loss; analytic fluid.gradients against central differences."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        vs = {}
        for name, value in feeds.items():
            vs[name] = fluid.data(name, [None, *value.shape[1:]], "float64",
                                  lod_level=len(lods.get(name, [])))
            vs[name].stop_gradient = name not in wrt
        loss = build(vs)
        grads = fluid.gradients(loss, [vs[n] for n in wrt])
    exe = fluid.Executor(PLACE)

    def run(values, fetch):
        feed = {n: _lod_feed(v, lods[n]) if n in lods else v for n, v in values.items()}
        return exe.run(main, feed=feed, fetch_list=fetch, scope=fluid.Scope())

    analytic = run(feeds, grads)
    for name, got in zip(wrt, analytic):
        numeric = np.zeros_like(feeds[name])
        for idx in np.ndindex(numeric.shape):
            plus, minus = dict(feeds), dict(feeds)
            plus[name], minus[name] = feeds[name].copy(), feeds[name].copy()
            plus[name][idx] += eps
            minus[name][idx] -= eps
            numeric[idx] = (float(run(plus, [loss])[0].sum())
                            - float(run(minus, [loss])[0].sum())) / (2 * eps)
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7,
                                   err_msg=f"d loss / d {name}")


def _weights(shape, seed):
    w = np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype("float32")
    return L.cast(L.assign(w), "float64")


def test_gradients_through_arrays_reorder_and_shrink():
    x_lens, y_lens = [2, 3, 1], [2, 1, 2]
    feeds = {"x": RNG.uniform(-1, 1, (6, 2)), "y": RNG.uniform(-1, 1, (5, 2)),
             "m": RNG.uniform(-1, 1, (3, 2))}

    def build(v):
        table = cf.lod_rank_table(v["x"])
        arr = cf.lod_tensor_to_array(v["x"], table)
        step1 = L.array_read(arr, L.fill_constant([1], "int64", 1))
        back = cf.array_to_lod_tensor(arr, table)
        ry = L.reorder_lod_tensor_by_rank(v["y"], table)
        rm = L.reorder_lod_tensor_by_rank(v["m"], table)
        sy = cf.shrink_memory(ry, L.fill_constant([1], "int64", 1), table)
        sm = cf.shrink_memory(rm, L.fill_constant([1], "int64", 2), table)
        return (L.reduce_sum(back * back * _weights([6, 2], 1))
                + L.reduce_sum(step1 * _weights([2, 2], 2))
                + L.reduce_sum(L.tanh(sy) * _weights([3, 2], 3))
                + L.reduce_sum(sm * sm * _weights([1, 2], 4))
                + L.reduce_sum(rm * _weights([3, 2], 5)))

    _check_grads(build, feeds, {"x": [x_lens], "y": [y_lens]}, ["x", "y", "m"])


def test_gradients_with_two_levels():
    lod = [[2, 1], [1, 3, 2]]
    feeds = {"x": RNG.uniform(-1, 1, (6, 2))}

    def build(v):
        t0 = cf.lod_rank_table(v["x"], level=0)
        t1 = cf.lod_rank_table(v["x"], level=1)
        a = cf.array_to_lod_tensor(cf.lod_tensor_to_array(v["x"], t1), t1)
        arr = cf.lod_tensor_to_array(v["x"] * v["x"], t0)
        first = L.array_read(arr, L.fill_constant([1], "int64", 0))
        r = L.reorder_lod_tensor_by_rank(v["x"], t0)
        return (L.reduce_sum(L.sin(a) * _weights([6, 2], 6))
                + L.reduce_sum(first * _weights([3, 2], 7))
                + L.reduce_sum(L.tanh(r) * _weights([6, 2], 8)))

    _check_grads(build, feeds, {"x": lod}, ["x"])


# -- errors ------------------------------------------------------------------------------------

def test_rank_table_of_a_variable_declared_without_lod_reads_the_fed_lod():
    # fluid 1.8.5 (its test_lod_rank_table): x declared with lod_level 0 and fed a LoDTensor;
    # the table is the fed LoD's; a feed without that level fails in the op, naming it
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        table = cf.lod_rank_table(x, level=1)
        table.persistable = True
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    fed = fluid.create_lod_tensor(np.ones((4, 2), "float32"), [[1, 2], [1, 1, 2]],
                                  fluid.CPUPlace())
    exe.run(main, feed={"x": fed}, scope=scope)
    assert list(scope.find_var(table.name).get_lod_rank_table().items()) == [
        (2, 2), (0, 1), (1, 1)]
    one_level = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="level 1 is out of range"):
        exe.run(main, feed={"x": one_level}, scope=scope)
    with pytest.raises(ExecutionError, match="carries no LoD"):
        exe.run(main, feed={"x": np.ones((3, 2), "float32")}, scope=scope)


def test_table_arguments_must_be_rank_tables():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 2], "float32", lod_level=1)
        with pytest.raises(TypeError, match="LOD_RANK_TABLE"):
            L.reorder_lod_tensor_by_rank(x, x)
        with pytest.raises(TypeError, match="lod_rank_table"):
            cf.lod_tensor_to_array(x, x)
        with pytest.raises(TypeError, match="rank table"):
            cf.array_to_lod_tensor(x, x)
        # fluid 1.8.5 builds array_to_lod_tensor on a LoD tensor; running it says what is wrong
        out = cf.array_to_lod_tensor(x, cf.lod_rank_table(x))
    fed = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], fluid.CPUPlace())
    with pytest.raises(ExecutionError, match="tensor array"):
        fluid.Executor(fluid.CPUPlace()).run(out.block.program, feed={"x": fed},
                                             fetch_list=[out], scope=fluid.Scope())


def test_reordering_a_tensor_with_other_sequences_names_both_counts():
    def build():
        x = fluid.data("x", [None, 1], "float32", lod_level=1)
        m = fluid.data("m", [None, 2], "float32")
        return [L.reorder_lod_tensor_by_rank(m, cf.lod_rank_table(x))]

    feeds = {"x": _lod_feed(np.zeros((3, 1), "float32"), [[1, 2]]),
             "m": np.zeros((3, 2), "float32")}
    with pytest.raises(ExecutionError, match="X has 3 rows .* rank table has 2 sequences"):
        _run(build, feeds)


def test_arrays_carry_their_elements_lod():
    """array_write of a LoD tensor and array_read back keep its LoD (fluid's arrays hold
    LoDTensors), inside a loop body too."""
    x = RNG.uniform(-1, 1, (5, 2))

    def build():
        v = fluid.data("x", [None, 2], "float64", lod_level=1)
        i = L.fill_constant([1], "int64", 0)
        arr = L.array_write(v, i)
        n = L.fill_constant([1], "int64", 2)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            got = L.array_read(arr, i)
            L.increment(i, 1, in_place=True)
            L.array_write(got * 2.0, i, array=arr)
            L.less_than(i, n, cond=cond)
        return [L.array_read(arr, L.fill_constant([1], "int64", t)) for t in range(3)]

    got = _run(build, {"x": _lod_feed(x, [[2, 3]])}, fetch_lod=True)
    for t, g in enumerate(got):
        np.testing.assert_array_equal(np.array(g), x * 2.0 ** t)
        assert g.recursive_sequence_lengths() == [[2, 3]]
