"""fluid 1.8's contributed ops with their own kernels (fluid.contrib.layers
match_matrix_tensor, sequence_topk_avg_pooling, var_conv_2d, multiclass_nms2, ...): each op
against a loop-by-loop numpy reference and central finite differences (tests/op_harness.py),
and each layer against fluid 1.8.5's stored outputs, LoD and gradients
(tests/oracle/make_contrib_ops.py)."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid
from op_harness import OpCase, check_op, rand
from oracle.make_contrib_ops import CASES, run_case
from oracle_io import load

import spmd.fluid as fluid
from spmd.core import unique_name
from spmd.errors import ExecutionError

FLUID18 = load("contrib_ops")

# gradients where spmd answers differently from fluid 1.8.5, on purpose: (case, index) -> why
DIFFERS = {
    # fluid's tree_conv_grad lays the per-node output gradient out as [output, 3] but
    # multiplies it by the filter laid out as [3, output]: its NodesVector gradient is wrong
    # whenever output_size * num_filters > 1 (tree_conv/one_output agrees); spmd's is the
    # forward's own (finite differences in test_op_against_numpy_and_finite_differences)
    ("tree_conv/depth2", 0): "NodesVector gradient",
    ("tree_conv/depth3_no_bias", 0): "NodesVector gradient",
}


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(int)


# -- numpy references, written as loops over fluid's layouts -----------------------------------

def _match_ref(X, Y, W, dim_t, lod):
    ox, oy = _offsets(lod["X"][0]), _offsets(lod["Y"][0])
    out = []
    for b in range(len(ox) - 1):
        for t in range(dim_t):
            for i in range(ox[b], ox[b + 1]):
                for j in range(oy[b], oy[b + 1]):
                    out.append(X[i] @ W[:, t, :] @ Y[j])
    tmp = (X @ W.reshape(X.shape[1], -1)).reshape(-1, 1)
    return {"Out": np.array(out, X.dtype).reshape(-1, 1), "Tmp": tmp}


def _topk_ref(X, ROW, COLUMN, topks, channel_num, lod):
    ox = _offsets(lod["X"][0])
    rows, cols = lod["ROW"][0], lod["COLUMN"][0]
    out, pos = [], []
    flat = X.reshape(-1)
    for b in range(len(rows)):
        maps = flat[ox[b]:ox[b + 1]].reshape(channel_num, rows[b], cols[b])
        for r in range(rows[b]):
            line = []
            for c in range(channel_num):
                order = sorted(range(cols[b]), key=lambda k: (-maps[c, r, k], k))
                order += [-1] * (topks[-1] - len(order))
                order = order[:topks[-1]]
                pos += order
                line += [sum(maps[c, r, k] for k in order[:top] if k >= 0) / top
                         for top in topks]
            out.append(line)
    return {"Out": np.array(out, X.dtype).reshape(-1, channel_num * len(topks)),
            "pos": np.array(pos, np.int32)}


def _var_conv_ref(X, ROW, COLUMN, W, InputChannel, OutputChannel, StrideH, StrideW, KernelH,
                  KernelW, lod):
    ox = _offsets(lod["X"][0])
    rows, cols = lod["ROW"][0], lod["COLUMN"][0]
    flat, out, col_all = X.reshape(-1), [], []
    for b in range(len(rows)):
        h, w = rows[b], cols[b]
        im = flat[ox[b]:ox[b + 1]].reshape(InputChannel, h, w)
        oh = (h - 1) // StrideH + 1 if h else 0
        ow = (w - 1) // StrideW + 1 if w else 0
        col = np.zeros((InputChannel, KernelH, KernelW, oh, ow), X.dtype)
        for c in range(InputChannel):
            for ky in range(KernelH):
                for kx in range(KernelW):
                    for y in range(oh):
                        for x in range(ow):
                            iy = y * StrideH + ky - KernelH // 2
                            ix = x * StrideW + kx - KernelW // 2
                            if 0 <= iy < h and 0 <= ix < w:
                                col[c, ky, kx, y, x] = im[c, iy, ix]
        col = col.reshape(InputChannel * KernelH * KernelW, oh * ow)
        col_all.append(col.reshape(-1))
        out.append((W @ col).reshape(-1))
    return {"Out": np.concatenate(out).reshape(-1, 1),
            "Col": np.concatenate(col_all).reshape(-1, 1)}


def _maps(channels, rows, cols, low=-1.0, high=1.0):
    sizes = [channels * r * c for r, c in zip(rows, cols)]
    return ({"X": rand(sum(sizes), 1, low=low, high=high), "ROW": np.zeros((sum(rows), 1)),
             "COLUMN": np.zeros((sum(cols), 1))},
            {"X": [sizes], "ROW": [list(rows)], "COLUMN": [list(cols)]})


def _distinct(shape, seed):
    """Values with distinct, well-separated ranks, so finite differences never swap two."""
    r = np.random.default_rng(seed)
    return (r.permutation(int(np.prod(shape))) * 0.05 - 1.0).reshape(shape)


def _topk_case(name, channels, rows, cols, topks):
    inputs, lod = _maps(channels, rows, cols)
    inputs["X"] = _distinct(inputs["X"].shape, len(name))
    return OpCase("sequence_topk_avg_pooling", inputs, _topk_ref,
                  {"topks": topks, "channel_num": channels}, lod=lod,
                  out_lod={"Out": [list(rows)]}, name=name)


def _var_conv_case(name, cin, cout, rows, cols, k, s):
    inputs, lod = _maps(cin, rows, cols)
    inputs["W"] = rand(cout, cin * k[0] * k[1])
    return OpCase("var_conv_2d", inputs, _var_conv_ref,
                  {"InputChannel": cin, "OutputChannel": cout, "StrideH": s[0],
                   "StrideW": s[1], "KernelH": k[0], "KernelW": k[1]}, lod=lod, name=name)


OP_CASES = [
    OpCase("match_matrix_tensor", {"X": rand(5, 3), "Y": rand(4, 3), "W": rand(3, 2, 3)},
           _match_ref, {"dim_t": 2}, lod={"X": [[2, 3]], "Y": [[3, 1]]},
           out_lod={"Out": [[12, 6]]}, name="match_two_channels"),
    OpCase("match_matrix_tensor", {"X": rand(3, 2), "Y": rand(5, 2), "W": rand(2, 1, 2)},
           _match_ref, {"dim_t": 1}, lod={"X": [[1, 0, 2]], "Y": [[2, 2, 1]]},
           out_lod={"Out": [[2, 0, 2]]}, name="match_empty_sequence"),
    _topk_case("topk_two_channels", 2, [3, 2], [4, 5], [1, 3]),
    _topk_case("topk_rows_shorter_than_k", 1, [2, 1, 2], [2, 3, 1], [1, 2, 4]),
    _var_conv_case("var_conv_3x3", 2, 3, [3, 4], [5, 2], (3, 3), (1, 1)),
    _var_conv_case("var_conv_strided_rect", 1, 2, [5, 3], [4, 6], (3, 2), (2, 3)),
    _var_conv_case("var_conv_even_kernel_empty_map", 2, 1, [2, 0, 3], [3, 2, 3], (2, 2), (1, 1)),
]


@pytest.mark.parametrize("case", OP_CASES, ids=str)
def test_op_against_numpy_and_finite_differences(case):
    check_op(case)


# -- the layers against fluid 1.8.5 ------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_matches_fluid18(name):
    want = FLUID18[name]
    with unique_name.guard():
        got = run_case(fluid, name)
    assert "error" not in got, got.get("message")
    assert "error" not in want, want.get("message")
    assert got["lods"] == want["lods"], f"{name}: LoD {got['lods']} != fluid's {want['lods']}"
    assert len(got["outs"]) == len(want["outs"])
    for i, (g, w) in enumerate(zip(got["outs"], want["outs"])):
        assert_array_like_fluid(g, w, f"{name} outs[{i}]")
    assert len(got["grads"]) == len(want["grads"]), f"{name}: gradients"
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        if (name, i) in DIFFERS:
            assert not np.allclose(g, w, atol=1e-3), f"{name}: fluid's gradient now agrees"
            continue
        assert_array_like_fluid(g, w, f"{name} grads[{i}]")


# -- the checks ---------------------------------------------------------------------------------

def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=[out])


def test_match_matrix_tensor_needs_one_batch_in_both_inputs():
    x = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], fluid.CPUPlace())
    y = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[3]], fluid.CPUPlace())

    def build():
        a = fluid.data("x", [None, 2], "float32", lod_level=1)
        b = fluid.data("y", [None, 2], "float32", lod_level=1)
        return fluid.contrib.layers.match_matrix_tensor(a, b, 2)[0]
    with pytest.raises(ExecutionError, match="same number of sequences"):
        _run(build, {"x": x, "y": y})


def test_topk_avg_pooling_checks_the_map_sizes():
    x = fluid.create_lod_tensor(np.ones((7, 1), "float32"), [[7]], fluid.CPUPlace())
    row = fluid.create_lod_tensor(np.ones((2, 1), "float32"), [[2]], fluid.CPUPlace())
    col = fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[3]], fluid.CPUPlace())

    def build():
        a = fluid.data("x", [None, 1], "float32", lod_level=1)
        r = fluid.data("row", [None, 1], "float32", lod_level=1)
        c = fluid.data("col", [None, 1], "float32", lod_level=1)
        return fluid.contrib.layers.sequence_topk_avg_pooling(a, r, c, [1, 2], 1)
    with pytest.raises(ExecutionError, match="holds 7 values"):
        _run(build, {"x": x, "row": row, "col": col})


def test_var_conv_2d_refuses_a_dense_input():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        a = fluid.data("x", [None, 1], "float32")
        r = fluid.data("row", [None, 1], "float32", lod_level=1)
        c = fluid.data("col", [None, 1], "float32", lod_level=1)
        with pytest.raises(Exception, match="lod_level 0"):
            fluid.contrib.layers.var_conv_2d(a, r, c, 1, 2, 3)


# -- tree_conv, rank_attention: numpy references and finite differences ----------------------

def _tree_ref(NodesVector, EdgeSet, Filter, max_depth):
    """Each node's patch by a recursive walk, with fluid's eta weights."""
    out = np.zeros(NodesVector.shape[:2] + Filter.shape[2:])
    for b in range(NodesVector.shape[0]):
        edges = [tuple(e) for e in EdgeSet[b] if e[0] and e[1]]
        kids: dict = {}
        for u, v in edges:
            kids.setdefault(u, []).append(v)

        def walk(node, index, siblings, depth, acc, kids=kids):
            eta_t = (max_depth - depth) / max_depth
            eta_l = (1 - eta_t) * (0.5 if siblings == 1 else (index - 1) / (siblings - 1))
            eta_r = (1 - eta_t) * (1 - eta_l)
            acc.append((node, np.array([eta_l, eta_r, eta_t])))
            if depth + 1 < max_depth:
                for i, v in enumerate(kids.get(node, [])):
                    walk(v, i + 1, len(kids[node]), depth + 1, acc, kids)

        for root in range(1, len(edges) + 2):
            members: list = []
            walk(root, 1, 1, 0, members)
            patch = sum(np.outer(NodesVector[b, v - 1], eta) for v, eta in members)
            out[b, root - 1] = np.einsum("fk,fkoc->oc", patch, Filter)
    return {"Out": out}


TREE_CASES = [
    OpCase("tree_conv", {"NodesVector": rand(2, 6, 3),
                         "EdgeSet": np.array([[[1, 2], [1, 3], [1, 4], [3, 5], [0, 0]],
                                              [[1, 2], [2, 3], [0, 0], [0, 0], [0, 0]]],
                                             "int32"),
                         "Filter": rand(3, 3, 2, 2)}, _tree_ref, {"max_depth": 3},
           name="tree_three_children_padding_rows"),
    OpCase("tree_conv", {"NodesVector": rand(1, 4, 2),
                         "EdgeSet": np.array([[[1, 2], [2, 3], [3, 4]]], "int64"),
                         "Filter": rand(2, 3, 1, 3)}, _tree_ref, {"max_depth": 1},
           name="tree_depth1_chain"),
]


def _rank_ref(X, RankOffset, RankParam, MaxRank):
    d = X.shape[1]
    out = np.zeros((X.shape[0], RankParam.shape[1]))
    for i, row in enumerate(RankOffset):
        for k in range(MaxRank):
            own, slot, idx = row[0], row[1 + 2 * k], row[2 + 2 * k]
            if own >= 1 and slot >= 1:
                block = ((own - 1) * MaxRank + slot - 1) * d
                out[i] += X[idx] @ RankParam[block:block + d]
    return {"Out": out}


RANK_OFFSET = np.array([[1, 1, 0, 2, 1, -1, 0], [2, 1, 0, 2, 1, 3, 3],
                        [3, -1, 0, 2, 3, 3, 2], [0, 1, 0, 1, 1, 1, 2],
                        [2, 3, 2, -1, 0, 1, 4]], "int32")
RANK_CASES = [
    OpCase("rank_attention", {"X": rand(5, 2), "RankOffset": RANK_OFFSET,
                              "RankParam": rand(2 * 9, 3)}, _rank_ref, {"MaxRank": 3},
           name="rank_attention_mixed_slots"),
]


@pytest.mark.parametrize("case", TREE_CASES + RANK_CASES, ids=str)
def test_tree_and_rank_ops_against_numpy_and_finite_differences(case):
    check_op(case)


def test_rank_attention_gives_no_gradient_to_its_input():
    """fluid 1.8.5's rank_attention_grad has only RankParam@GRAD: layers below it are not
    trained through it."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        x.stop_gradient = False
        offset = fluid.data("offset", [None, 7], "int32")
        out = fluid.contrib.layers.rank_attention(x, offset, [18, 3], None, max_rank=3)
        grads = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    assert grads == [None]


# -- tdm_child, tdm_sampler --------------------------------------------------------------------

TREE_INFO = np.array([[0, 0, 0, 1, 2], [0, 1, 0, 3, 4], [0, 1, 0, 5, 6], [1, 2, 1, 0, 0],
                      [2, 2, 1, 0, 0], [3, 2, 2, 0, 0], [4, 2, 2, 0, 0]])


def test_tdm_child_int64_tree_and_ids_outside_it():
    def build(ids):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            x = fluid.data("x", [None, 1], "int64")
            attr = fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(
                TREE_INFO.astype("int64")))
            child, mask = fluid.contrib.layers.tdm_child(x, 7, 2, attr, dtype="int64")
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(fluid.default_startup_program())
            return exe.run(feed={"x": np.array(ids, "int64").reshape(-1, 1)},
                           fetch_list=[child, mask])
    child, mask = build([2, 0, 4])
    assert child.dtype == np.int64 and child.shape == (3, 1, 2)
    np.testing.assert_array_equal(child.reshape(3, 2), [[5, 6], [0, 0], [0, 0]])
    np.testing.assert_array_equal(mask.reshape(3, 2), [[1, 1], [0, 0], [0, 0]])
    with pytest.raises(ExecutionError, match="outside the tree"):
        build([7])


def _sampler(negs, seed, output_positive=True):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1], "int32")
        travel = np.array([[1, 3], [1, 4], [2, 5], [2, 6]], "int32")
        layer = np.array([[1], [2], [3], [4], [5], [6]], "int32")
        out = fluid.contrib.layers.tdm_sampler(
            x, negs, [2, 4], 4, fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(travel)),
            fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(layer)),
            output_positive=output_positive, output_list=False, seed=seed)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return lambda ids: exe.run(main, feed={"x": np.array(ids, "int32").reshape(-1, 1)},
                               fetch_list=list(out))


def test_tdm_sampler_negatives_are_other_nodes_of_the_layer():
    run = _sampler([1, 2], seed=0)
    paths = {0: (1, 3), 1: (1, 4), 2: (2, 5), 3: (2, 6)}
    for _ in range(20):
        out, labels, mask = run([0, 1, 2, 3])
        assert out.shape == (4, 5)
        np.testing.assert_array_equal(labels, [[1, 0, 1, 0, 0]] * 4)
        np.testing.assert_array_equal(mask, np.ones((4, 5)))
        for leaf, row in enumerate(out):
            first, second = paths[leaf]
            assert row[0] == first and row[2] == second
            assert row[1] in (1, 2) and row[1] != first
            assert set(row[3:]) <= {3, 4, 5, 6} and second not in row[3:]
            assert len(set(row[3:])) == 2, f"negatives drawn twice: {row}"


def test_tdm_sampler_seed_repeats_its_draws_and_zero_draws_anew():
    fixed = _sampler([1, 3], seed=7, output_positive=False)
    first = fixed([0, 1, 2, 3] * 5)[0]
    assert first.shape == (20, 4)
    np.testing.assert_array_equal(fixed([0, 1, 2, 3] * 5)[0], first)
    fluid.default_main_program().random_seed = 3
    stream = _sampler([1, 3], seed=0, output_positive=False)
    draws = {stream([0, 1, 2, 3] * 5)[0].tobytes() for _ in range(4)}
    assert len(draws) > 1, "seed 0 must draw from the program's stream, anew each run"


def test_tdm_sampler_checks_its_lists():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 1], "int32")
        with pytest.raises(ValueError, match="must match the shape of layers"):
            fluid.contrib.layers.tdm_sampler(x, [1], [2, 4], 4)
        with pytest.raises(ValueError, match="must be less than the number of nodes"):
            fluid.contrib.layers.tdm_sampler(x, [2, 1], [2, 4], 4)


# -- search_pyramid_hash -----------------------------------------------------------------------

def test_xxh32_known_values():
    from spmd.kernels.contrib_search import xxh32

    assert xxh32(b"") == 0x02CC5D05 and xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F  # > 16 bytes
    assert xxh32(b"abc", 1) != xxh32(b"abc", 0)


def _pyramid_program(use_filter):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1], "int32", lod_level=1)
        out = fluid.contrib.layers.search_pyramid_hash(
            x, 4, 20, 3, 2, 0.0, True, use_filter, 1, 1, 1, 0.1,
            param_attr=fluid.ParamAttr(name="ph_w"))
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss


def test_search_pyramid_hash_table_is_frozen_as_in_fluid():
    main, startup, loss = _pyramid_program(False)
    assert "pyramid_hash_grad" not in [op.type for op in main.global_block().ops]
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": fluid.create_lod_tensor(np.array([[1], [2], [3]], "int32"), [[3]],
                                         fluid.CPUPlace())}
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        before = np.array(fluid.global_scope().find_var("ph_w").get_tensor())
        exe.run(main, feed=feed, fetch_list=[loss])
        np.testing.assert_array_equal(
            np.array(fluid.global_scope().find_var("ph_w").get_tensor()), before)


def test_search_pyramid_hash_refuses_bloom_filter_lists():
    main, startup, loss = _pyramid_program(True)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": fluid.create_lod_tensor(np.array([[1], [2]], "int32"), [[2]],
                                         fluid.CPUPlace())}
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        with pytest.raises(ExecutionError, match="bloom filters"):
            exe.run(main, feed=feed, fetch_list=[loss])


# -- filter_by_instag --------------------------------------------------------------------------

def _instag_ref(Ins, Ins_tag, Filter_tag, is_lod, out_val_if_empty, lod):
    """Out and IndexMap (LossWeight is float32 whatever Ins is, as in fluid: the oracle
    cases compare it)."""
    ins_off = _offsets(lod["Ins"][0]) if is_lod and "Ins" in lod else np.arange(len(Ins) + 1)
    tag_off = _offsets(lod["Ins_tag"][0])
    wanted = set(Filter_tag.reshape(-1).tolist())
    kept = [i for i in range(len(tag_off) - 1)
            if wanted & set(Ins_tag.reshape(-1)[tag_off[i]:tag_off[i + 1]].tolist())]
    if not kept:
        return {"Out": np.full((1, Ins.shape[1]), out_val_if_empty, Ins.dtype),
                "IndexMap": np.array([[0, 1, 1]], np.int64)}
    rows = [r for i in kept for r in range(ins_off[i], ins_off[i + 1])]
    starts = np.cumsum([0] + [ins_off[i + 1] - ins_off[i] for i in kept])[:-1]
    return {"Out": Ins[rows],
            "IndexMap": np.array([[s, ins_off[i], ins_off[i + 1] - ins_off[i]]
                                  for s, i in zip(starts, kept)], np.int64)}


_INSTAG_OUTS = {"Out": 1, "LossWeight": 1, "IndexMap": 1}
INSTAG_CASES = [
    OpCase("filter_by_instag", {"Ins": rand(5, 2), "Ins_tag": np.array([[1], [2], [3], [2],
                                                                        [5]], "int64"),
                                "Filter_tag": np.array([2], "int64")}, _instag_ref,
           {"is_lod": True, "out_val_if_empty": 0}, lod={"Ins": [[2, 1, 2]],
                                                         "Ins_tag": [[2, 1, 2]]},
           out_lod={"Out": [[2, 2]]}, outputs=_INSTAG_OUTS, name="instag_sequences"),
    OpCase("filter_by_instag", {"Ins": rand(3, 2), "Ins_tag": np.array([[1], [2], [3]], "int64"),
                                "Filter_tag": np.array([9], "int64")}, _instag_ref,
           {"is_lod": False, "out_val_if_empty": 7}, lod={"Ins_tag": [[1, 1, 1]]},
           out_lod={"Out": [[1]]}, outputs=_INSTAG_OUTS, name="instag_nothing_kept"),
]


@pytest.mark.parametrize("case", INSTAG_CASES, ids=str)
def test_filter_by_instag_against_numpy_and_finite_differences(case):
    check_op(case)
