"""Inference models keep fluid 1.8's feed and fetch ops (tests/oracle/
make_inference_feed_fetch.py): save_inference_model writes them around the pruned program,
load_inference_model names the feeds and fetches from them, and Executor.run treats them as
fluid's executor does (the run's feeds and fetches must match them)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_inference_feed_fetch import XV, ZV, build
from oracle_io import load

import spmd.fluid as fluid

CASES = load("inference_feed_fetch")


def _saved(tmp_path):
    prog, startup, out, avg = build(fluid)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path), ["x", "z"], [out, avg], exe, prog)
    return exe


def test_the_saved_model_has_fluids_feed_and_fetch_ops(tmp_path):
    exe = _saved(tmp_path)
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        block = program.global_block()
        assert [op.type for op in block.ops] == CASES["ops"]
        assert [[op.output("Out")[0], op.attr("col")] for op in block.ops
                if op.type == "feed"] == CASES["feed_ops"]
        assert [[op.input("X")[0], op.attr("col")] for op in block.ops
                if op.type == "fetch"] == CASES["fetch_ops"]
        assert block.var("feed").type == fluid.core.VarDesc.VarType.FEED_MINIBATCH
        assert block.var("fetch").type == fluid.core.VarDesc.VarType.FETCH_LIST
        assert feeds == CASES["feed_names"]
        assert [v.name for v in fetches] == CASES["fetch_names"]
        out, avg = exe.run(program, feed={"x": XV, "z": ZV}, fetch_list=fetches)
    np.testing.assert_allclose(out, CASES["out"], rtol=1e-6)
    np.testing.assert_allclose(avg, CASES["avg"], rtol=1e-6)


def test_a_run_must_match_the_feed_and_fetch_ops(tmp_path):
    exe = _saved(tmp_path)
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        with pytest.raises(ValueError, match="'feed_targets' does not have z"):
            exe.run(program, feed={"x": XV}, fetch_list=fetches)
        with pytest.raises(ValueError, match="'fetch_targets' does not have"):
            exe.run(program, feed={"x": XV, "z": ZV}, fetch_list=fetches[:1])
        with pytest.raises(ValueError, match="in that order"):
            exe.run(program, feed={"x": XV, "z": ZV}, fetch_list=fetches[::-1])


def test_a_program_given_feed_and_fetch_ops_runs_as_without_them():
    prog, startup, out, avg = build(fluid)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        want = exe.run(prog, feed={"x": XV, "z": ZV}, fetch_list=[out, avg])
        from spmd.executor.feed_fetch_ops import add_feed_fetch_ops

        add_feed_fetch_ops(prog, ["x", "z"], [out.name, avg.name])
        got = exe.run(prog, feed={"x": XV, "z": ZV}, fetch_list=[out, avg])
        compiled = fluid.CompiledProgram(prog).with_data_parallel(places=[fluid.CPUPlace()])
        got_dp = exe.run(compiled, feed={"x": XV, "z": ZV}, fetch_list=[out, avg])
    for a, b, c in zip(want, got, got_dp):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-6)
