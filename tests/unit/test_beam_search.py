"""beam_search and beam_search_decode: one step against a numpy reference on two-level LoD
tensors (accumulated scores or probabilities, ids or column indices, ended prefixes, pruned
sources; float64 and float32), the output LoD and parent_idx, a hand-worked decode of a small
search tree (one end token kept, sentences best first), and the errors. fluid 1.8.5's own
outputs for the same ops are compared in test_rnn_api_oracle.py."""
from __future__ import annotations

import numpy as np
import pytest
from op_harness import OpCase, check_forward

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

RNG = np.random.default_rng(85)
layers = fluid.layers


def beam_search_ref(pre_ids, pre_scores, scores, beam_size, end_id, is_accumulated=True,
                    ids=None, lod=None, level=0):
    """Each source's best beam_size candidates (distinct scores: a plain sort)."""
    src_lens, row_lens = lod["scores"]
    src_rows = np.cumsum([0] + [sum(row_lens[sum(src_lens[:s]):sum(src_lens[:s + 1])])
                                for s in range(len(src_lens))])
    chosen = [[] for _ in range(scores.shape[0])]
    for s in range(len(src_lens)):
        items = []
        for row in range(src_rows[s], src_rows[s + 1]):
            if pre_ids[row, 0] == end_id:
                items.append((pre_scores[row, 0], row, end_id))
                continue
            for d in range(scores.shape[1]):
                value = scores[row, d] if is_accumulated else \
                    pre_scores[row, 0] + np.log(scores[row, d])
                items.append((value, row, int(ids[row, d]) if ids is not None else d))
        items.sort(key=lambda it: (-it[0], -it[1]))
        top = items[:beam_size]
        if all(it[2] == end_id and pre_ids[it[1], 0] == end_id for it in top):
            top = []
        for it in top:
            chosen[it[1]].append(it)
    flat = [it for c in chosen for it in c]
    return {"selected_ids": np.array([it[2] for it in flat], dtype="int64").reshape(-1, 1),
            "selected_scores": np.array([it[0] for it in flat]).reshape(-1, 1),
            "parent_idx": np.repeat(np.arange(len(chosen)), [len(c) for c in chosen])
            .astype("int32")}


def _case(name, src_lens, width, beam, end_id=0, accumulated=True, with_ids=True,
          ended=()):
    rows = sum(src_lens)
    pre_ids = RNG.integers(1, 9, (rows, 1)).astype("int64")
    pre_ids[list(ended), 0] = end_id
    pre_scores = RNG.uniform(-3, 0, (rows, 1))
    if accumulated:
        scores = pre_scores + np.log(RNG.uniform(0.05, 1, (rows, width)))
    else:
        scores = RNG.uniform(0.05, 1, (rows, width))
    ids = np.stack([RNG.permutation(12)[:width] for _ in range(rows)]).astype("int64")
    ids[ids == end_id] = 20  # only the ended prefixes end in these cases
    lod = [list(src_lens), [1] * rows]
    inputs = {"pre_ids": pre_ids, "pre_scores": pre_scores, "scores": scores}
    if with_ids:
        inputs["ids"] = ids
    attrs = {"beam_size": beam, "end_id": end_id, "is_accumulated": accumulated}
    case = OpCase("beam_search", inputs, beam_search_ref, attrs, name=name,
                  lod={k: lod for k in inputs}, rtol=1e-12, fp32_rtol=1e-5)
    want = beam_search_ref(**inputs, **attrs, lod=case.lod)
    counts = np.bincount(want["parent_idx"], minlength=rows).tolist()
    case.out_lod = {"selected_ids": [list(src_lens), counts],
                    "selected_scores": [list(src_lens), counts]}
    return case


CASES = [
    _case("accumulated", [2, 3], 4, 3),
    _case("probabilities", [1, 2], 5, 2, accumulated=False),
    _case("column_ids", [3], 4, 4, with_ids=False),
    _case("ended_prefixes", [2, 2], 3, 2, ended=(0, 3)),
    _case("beam_wider_than_candidates", [1, 1], 2, 3),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_beam_search_step_matches_reference(case):
    check_forward(case, "float64")
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)


def _run_step(feeds, lod, beam, end_id, **kwargs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        vs = {k: fluid.data(k, [-1, a.shape[1]], str(a.dtype), lod_level=2)
              for k, a in feeds.items()}
        outs = layers.beam_search(vs["pre_ids"], vs["pre_scores"], vs.get("ids"), vs["scores"],
                                  beam, end_id, return_parent_idx=True, **kwargs)
    place = fluid.CPUPlace()
    got = fluid.Executor(place).run(
        main, feed={k: fluid.create_lod_tensor(a, lod, place) for k, a in feeds.items()},
        fetch_list=list(outs), return_numpy=False)
    return [np.array(t) for t in got], got[0].lod()


def test_a_source_whose_beams_all_ended_is_pruned():
    feeds = {"pre_ids": np.array([[0], [0], [5]], "int64"),
             "pre_scores": np.array([[-1.0], [-2.0], [-0.5]], "float32"),
             "ids": np.array([[3, 4], [6, 7], [8, 9]], "int64"),
             "scores": np.array([[-9.0, -9.5], [-9.0, -9.5], [-1.0, -2.0]], "float32")}
    (ids, scores, parent), lod = _run_step(feeds, [[2, 1], [1, 1, 1]], 2, 0)
    # source 0: both prefixes ended, only end ids are chosen -> no rows; source 1 goes on
    np.testing.assert_array_equal(ids.ravel(), [8, 9])
    np.testing.assert_allclose(scores.ravel(), [-1.0, -2.0])
    np.testing.assert_array_equal(parent, [2, 2])
    assert lod == [[0, 2, 3], [0, 0, 0, 2]]


# -- beam_search_decode -------------------------------------------------------------------------

# a one-source search with beam 2 and end id 1, step by step: (ids, scores, LoD lengths)
TREE = [
    ([0], [0.0], [[1], [1]]),                         # the start token
    ([3, 4], [-1.0, -2.0], [[1], [2]]),               # both from the start
    ([1, 5], [-1.5, -2.5], [[2], [1, 1]]),            # 3 -> end, 4 -> 5
    ([1, 1], [-1.5, -3.0], [[2], [1, 1]]),            # the ended beam carries its end on
]


def _decode(steps, beam, end_id):
    main = fluid.Program()
    feed = {}
    place = fluid.CPUPlace()
    with fluid.program_guard(main, fluid.Program()):
        ids_array = layers.create_array("int64")
        scores_array = layers.create_array("float32")
        for t, (ids, scores, lengths) in enumerate(steps):
            i = layers.fill_constant([1], "int64", t)
            iv = fluid.data(f"ids{t}", [-1, 1], "int64", lod_level=2)
            sv = fluid.data(f"scores{t}", [-1, 1], "float32", lod_level=2)
            layers.array_write(iv, i, array=ids_array)
            layers.array_write(sv, i, array=scores_array)
            feed[iv.name] = fluid.create_lod_tensor(
                np.array(ids, "int64").reshape(-1, 1), lengths, place)
            feed[sv.name] = fluid.create_lod_tensor(
                np.array(scores, "float32").reshape(-1, 1), lengths, place)
        out = layers.beam_search_decode(ids_array, scores_array, beam, end_id)
    got = fluid.Executor(place).run(main, feed=feed, fetch_list=list(out), return_numpy=False)
    return np.array(got[0]), np.array(got[1]), got[0].lod(), got[1].lod()


def test_decode_backtracks_keeps_one_end_token_and_sorts_by_score():
    ids, scores, lod, score_lod = _decode(TREE, 2, 1)
    np.testing.assert_array_equal(ids, [0, 3, 1, 0, 4, 5, 1])
    np.testing.assert_allclose(scores, [0.0, -1.0, -1.5, 0.0, -2.0, -2.5, -3.0])
    assert lod == score_lod == [[0, 2], [0, 3, 7]]
    assert ids.dtype == np.int64 and scores.dtype == np.float32


def test_decode_of_a_source_pruned_early():
    # two sources; the second stops having rows after step 1 (all its beams ended)
    steps = [([0, 0], [0.0, 0.0], [[1, 1], [1, 1]]),
             ([3, 1], [-1.0, -0.5], [[1, 1], [1, 1]]),
             ([4], [-2.0], [[1, 1], [1, 0]])]
    ids, scores, lod, _ = _decode(steps, 1, 1)
    np.testing.assert_array_equal(ids, [0, 3, 4, 0, 1])
    np.testing.assert_allclose(scores, [0.0, -1.0, -2.0, 0.0, -0.5])
    assert lod == [[0, 1, 2], [0, 3, 5]]


def _step_program(scores_lod_level):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.data("ids", [-1, 1], "int64", lod_level=2)
        pre = fluid.data("pre", [-1, 1], "float32", lod_level=2)
        scores = fluid.data("scores", [-1, 3], "float32", lod_level=scores_lod_level)
        sel, _ = layers.beam_search(ids, pre, None, scores, 2, 1)
    return main, sel


def test_errors_say_what_to_give():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ids = fluid.data("ids", [-1, 1], "int64", lod_level=2)
        scores = fluid.data("scores", [-1, 1], "float32", lod_level=2)
        with pytest.raises(InvalidArgumentError, match="must be a tensor array"):
            layers.beam_search_decode(ids, scores, 2, 1)
        with pytest.raises(InvalidArgumentError, match="pre_ids.*int64"):
            layers.beam_search(scores, scores, ids, scores, 2, 1)
    place = fluid.CPUPlace()
    feed = {"ids": fluid.create_lod_tensor(np.zeros((2, 1), "int64"), [[2], [1, 1]], place),
            "pre": fluid.create_lod_tensor(np.zeros((2, 1), "float32"), [[2], [1, 1]], place),
            "scores": np.zeros((2, 3), "float32")}
    main, sel = _step_program(0)
    with pytest.raises(Exception, match="scores carries no LoD.*lod_reset"):
        fluid.Executor(place).run(main, feed=feed, fetch_list=[sel])
    main, sel = _step_program(2)
    feed["scores"] = fluid.create_lod_tensor(np.zeros((3, 3), "float32"), [[2], [1, 2]], place)
    with pytest.raises(Exception, match="pre_ids has 2 rows but scores has 3"):
        fluid.Executor(place).run(main, feed=feed, fetch_list=[sel])
    with pytest.raises(Exception, match="more than beam_size=1"):
        _decode(TREE, 1, 1)


def _fluid_insert_order(items, beam_size):
    """fluid's CPU Insert over every candidate in arrival order (no filtering)."""
    def less(a, b):
        return a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])

    top = []
    for item in items:
        if len(top) < beam_size:
            top.append(None)
        elif less(item, top[-1]):
            continue
        k = len(top) - 2
        while k >= 0 and less(top[k], item):
            top[k + 1] = top[k]
            k -= 1
        top[k + 1] = item
    return top


@pytest.mark.parametrize("seed", range(6))
def test_many_ties_and_wide_rows_keep_fluids_order(seed):
    rng = np.random.default_rng(seed)
    rows, width, beam = 3, 40, 4
    scores = rng.choice([-1.0, -0.5, -0.25], size=(rows, width)).astype("float32")
    ids = rng.integers(1, 50, (rows, width)).astype("int64")
    feeds = {"pre_ids": np.full((rows, 1), 7, "int64"),
             "pre_scores": np.zeros((rows, 1), "float32"), "ids": ids, "scores": scores}
    (got_ids, got_scores, parent), _ = _run_step(feeds, [[rows], [1] * rows], beam, 0)
    items = [(scores[r, d], r, ids[r, d]) for r in range(rows) for d in range(width)]
    top = _fluid_insert_order(items, beam)
    want = [it for r in range(rows) for it in top if it[1] == r]  # by row, best first
    np.testing.assert_array_equal(got_ids.ravel(), [it[2] for it in want])
    np.testing.assert_array_equal(got_scores.ravel(), [it[0] for it in want])
    np.testing.assert_array_equal(parent, [it[1] for it in want])
