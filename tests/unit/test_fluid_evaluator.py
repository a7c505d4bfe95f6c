"""fluid.evaluator's EditDistance and ChunkEvaluator equal fluid 1.8.5 over a pass of two LoD
batches: each batch's metrics, eval() of the pass, and reset() starting a new pass."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

STORED = load("evaluator")  # tests/oracle/make_evaluator.py, run in fluid 1.8.5


def lod(tokens, lengths):
    return fluid.create_lod_tensor(np.array(tokens, "int64").reshape(-1, 1), [lengths],
                                   fluid.CPUPlace())


@pytest.mark.parametrize("kind", ["edit", "chunk"])
def test_a_pass_equals_fluid(kind):
    want = STORED[kind]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [None, 1], "int64", lod_level=1)
        b = fluid.data("b", [None, 1], "int64", lod_level=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kind == "edit":
                evaluator = fluid.evaluator.EditDistance(a, b, ignored_tokens=[6])
            else:
                evaluator = fluid.evaluator.ChunkEvaluator(a, b, "IOB", 2)
        assert any("deprecated" in str(w.message) for w in caught)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    evaluator.reset(exe)
    keys = ("hyp", "ref") if kind == "edit" else ("inf", "lab")
    for batch, batch_want in zip(want["batches"], want["per_batch"]):
        feed = {"a": lod(*batch[keys[0]]), "b": lod(*batch[keys[1]])}
        got = exe.run(main, feed=feed, fetch_list=evaluator.metrics)
        for g, w in zip(got, batch_want):
            np.testing.assert_allclose(np.asarray(g).reshape(-1), w.reshape(-1), rtol=1e-6)
    for g, w in zip(evaluator.eval(exe), want["eval"]):
        np.testing.assert_allclose(np.asarray(g).reshape(-1), w.reshape(-1), rtol=1e-6)
    evaluator.reset(exe)
    exe.run(main, feed=feed, fetch_list=evaluator.metrics)
    for g, w in zip(evaluator.eval(exe), want["eval_after_reset_and_one_batch"]):
        np.testing.assert_allclose(np.asarray(g).reshape(-1), w.reshape(-1), rtol=1e-6)


def test_evaluators_refuse_a_sub_block():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.data("a", [None, 1], "int64", lod_level=1)
        main._create_block()
        with pytest.raises(ValueError, match="root block"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fluid.evaluator.EditDistance(a, a)


def test_detection_map_evaluator_equals_the_metric():
    def build(cls):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard(), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            det = fluid.data("det", [None, 6], "float32", lod_level=1)
            label = fluid.data("label", [None, 1], "float32", lod_level=1)
            box = fluid.data("box", [None, 4], "float32", lod_level=1)
            m = cls(det, label, box, class_num=3)
        return main, startup, m

    place = fluid.CPUPlace()
    feed = {
        "det": fluid.create_lod_tensor(np.array(
            [[1, 0.9, 0.1, 0.1, 0.5, 0.5], [2, 0.8, 0.5, 0.5, 0.9, 0.9],
             [1, 0.3, 0.6, 0.6, 0.7, 0.7]], "float32"), [[3]], place),
        "label": fluid.create_lod_tensor(np.array([[1], [2]], "float32"), [[2]], place),
        "box": fluid.create_lod_tensor(np.array([[0.1, 0.1, 0.5, 0.5], [0.5, 0.5, 0.9, 0.9]],
                                                "float32"), [[2]], place),
    }
    results = []
    for cls in (fluid.metrics.DetectionMAP, fluid.evaluator.DetectionMAP):
        main, startup, m = build(cls)
        exe = fluid.Executor(place)
        exe.run(startup)
        m.reset(exe)
        results.append([float(np.asarray(v).reshape(-1)[0])
                        for v in exe.run(main, feed=feed, fetch_list=list(m.get_map_var()))])
    assert results[0] == results[1] and results[0][0] > 0.5
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        det = fluid.data("det", [None, 6], "float32", lod_level=1)
        label = fluid.data("label", [None, 1], "float32", lod_level=1)
        box = fluid.data("box", [None, 4], "float32", lod_level=1)
        with pytest.warns(Warning, match="deprecated"):
            evaluator = fluid.evaluator.DetectionMAP(det, label, box, class_num=3)
    assert evaluator.metrics == list(evaluator.get_map_var())
