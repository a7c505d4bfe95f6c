"""Executor.run(use_prune=True) and Program._prune_with_input against fluid 1.8.5
(tests/oracle/make_prune.py): the ops a prune keeps, the parameter after pruned runs of a
program with two optimizers over one shared parameter, the cache of pruned programs, the
feeds a pruned program drops, and Paddle's test_prune.py behaviours."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracle.make_prune import LABEL, X, net, trained
from oracle_io import load

import spmd.fluid as fluid

CASES = load("prune")

# spmd spells cross_entropy2's gradient op as fluid's C++ registry does not; the rest agree
_SAME = {"cross_entropy_grad2": "cross_entropy2_grad"}


def _ops(program):
    return [op.type for op in program.global_block().ops]


def _fluid_ops(name):
    return [_SAME.get(t, t) for t in CASES[name]]


def test_prune_with_input_keeps_the_ops_fluid_keeps():
    prog, _, y, loss1, loss2, train1, _ = net(fluid)
    assert _ops(prog) == _fluid_ops("all_ops")
    assert _ops(prog._prune_with_input([y.name], [loss1])) == _fluid_ops("loss1_from_y")
    assert _ops(prog._prune_with_input(["x"], [loss2])) == _fluid_ops("loss2_from_x")
    # an optimizer op is kept as a target only: the second SGD, which writes the same
    # parameter, is not pulled in through it
    kept = prog._prune_with_input(["x", "label"], [loss1] + train1[0])
    assert _ops(kept) == _fluid_ops("loss1_and_train1")
    # variables no kept op names go (loss2's), the fed and read ones stay
    assert not kept.global_block().has_var(loss2.name)
    assert kept.global_block().has_var("x") and kept.global_block().has_var("w")


def test_prune_refuses_what_fluid_refuses():
    prog, _, y, loss1, *_ = net(fluid)
    with pytest.raises(ValueError, match="can only be Variable or Operator"):
        prog._prune(targets=None)
    with pytest.raises(ValueError, match="associated operator"):
        prog._prune_with_input([], ["x"])  # a data variable no op writes, not fed


@pytest.mark.parametrize("fetch,use_prune,case", [
    (["loss1"], True, "w_fetch_only_use_prune"),  # every optimizer op kept
    (["loss1", "train1"], False, "w_train1"),  # minimize()'s result: that SGD only
    (["train2"], False, "w_train2"),
    (["loss1"], False, "w_no_prune"),
])
def test_pruned_runs_train_as_fluid(fetch, use_prune, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # train2 needs no label: fluid warns and drops it
        got = trained(fluid, fetch, use_prune)
    np.testing.assert_allclose(got, CASES[case], rtol=1e-6, atol=1e-7)


def test_pruned_program_is_cached_per_feed_and_fetch_list(monkeypatch):
    calls = []
    original = fluid.Executor._prune_program

    def counting(self, program, feed, fetch_list, optimize_ops):
        calls.append([getattr(f, "name", f) for f in fetch_list])
        return original(self, program, feed, fetch_list, optimize_ops)

    monkeypatch.setattr(fluid.Executor, "_prune_program", counting)
    prog, startup, y, loss1, loss2, train1, train2 = net(fluid)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        feed = {"x": X, "label": LABEL}
        for _ in range(3):
            exe.run(prog, feed=feed, fetch_list=[loss1.name, train1])
            exe.run(prog, feed=feed, fetch_list=[loss1.name, train2])
    assert calls == [[loss1.name], [loss1.name]]  # one prune per fetch list, ops counted


def test_pruned_run_drops_unneeded_feeds_and_leaves_pruned_variables_out():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2], "float32")
        y = fluid.layers.fc(x, 2)
        loss1 = fluid.layers.mean(y)
        loss2 = fluid.layers.mean(fluid.layers.square(y))
        loss2.persistable = True
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    yv = np.arange(12, dtype="float32").reshape(6, 2)
    with fluid.scope_guard(scope):
        exe.run(startup)
        with pytest.warns(UserWarning, match="variable x is not found in program"):
            got, = exe.run(main, feed={y.name: yv, "x": X}, fetch_list=[loss1],
                           use_prune=True)
        np.testing.assert_allclose(got, [yv.mean()], rtol=1e-6)
        assert scope.find_var(loss2.name) is None  # pruned: never computed, never made
        exe.run(main, feed={"x": X}, fetch_list=[loss1])  # unpruned: loss2 computed too
        assert scope.find_var(loss2.name) is not None


def test_a_pruned_training_run_fed_past_the_parameters_fails_as_fluid():
    # fed y, the SGD ops (kept) need w's gradient, hence x: refused; the program's
    # persistable variables exist in the scope all the same, as fluid's executor made them
    prog, startup, y, loss1, loss2, *_ = net(fluid)
    loss1.persistable = True
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        with pytest.raises(Exception, match="x"):
            exe.run(prog, feed={y.name: X, "label": LABEL}, fetch_list=[loss1.name],
                    use_prune=True)
        assert scope.find_var(loss1.name) is not None
        assert scope.find_var(loss2.name) is None


def test_a_non_optimizer_op_in_fetch_list_is_refused():
    prog, startup, y, loss1, *_ = net(fluid)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(TypeError, match="not an optimize_op"):
        exe.run(prog, feed={"x": X, "label": LABEL}, fetch_list=[prog.global_block().ops[0]])


def test_a_pruned_compiled_program_trains_as_its_program():
    ref = trained(fluid, ["loss1", "train1"], False)
    prog, startup, y, loss1, loss2, train1, train2 = net(fluid)
    compiled = fluid.CompiledProgram(prog).with_data_parallel(
        loss_name=loss1.name, places=fluid.CPUPlace())
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(2):
            exe.run(compiled, feed={"x": X, "label": LABEL}, fetch_list=[loss1.name, train1])
        np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), ref,
                                   rtol=1e-6)
