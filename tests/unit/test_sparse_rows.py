"""Row updates in place (issue 24): with a SelectedRows gradient, sgd, lazy adam, adagrad and
ftrl write only the looked-up rows of the parameter and of its state, into the arrays
themselves (the plan lends them, Plan.memory_report() counts it), so a step allocates
nothing the size of the table (tracemalloc counts numpy's buffers); the numbers are bitwise
those of the copying path (in-place loans off), and the dense formula on the touched rows.
A clipped sparse gradient (by value, norm, global norm) keeps all of that. (A regularized one
does not, by fluid 1.8.5's semantics: its sum with the dense decay term is dense, every row
decays; spmd/optimizer/regularizer.py, tests/unit/test_sparse_rows_oracle.py.)"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.selected_rows import SelectedRows
from spmd.kernels.context import KernelContext
from spmd.kernels.registry import run_kernel

PLACE = fluid.CPUPlace()
ROW_WISE = {  # optimizer -> how many arrays of the table's size it keeps (the table too)
    "sgd": (lambda **kw: fluid.optimizer.SGD(0.2, **kw), 1),
    "lazy_adam": (lambda **kw: fluid.optimizer.Adam(0.05, lazy_mode=True, **kw), 3),
    "adagrad": (lambda **kw: fluid.optimizer.Adagrad(0.2, **kw), 2),
    "ftrl": (lambda **kw: fluid.optimizer.Ftrl(0.2, l1=0.01, l2=0.01, **kw), 3),
}
CLIPS = {  # gradient clipping works on the merged rows of a sparse gradient (optimizer/clip.py)
    "by_value": lambda: fluid.clip.GradientClipByValue(0.01),
    "by_norm": lambda: fluid.clip.GradientClipByNorm(0.01),
    "by_global_norm": lambda: fluid.clip.GradientClipByGlobalNorm(0.01),
}


def _build(opt: str, vocab: int, dim: int, **optimizer_args):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 5
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[vocab, dim], is_sparse=True)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(emb, 4), y))
        ROW_WISE[opt][0](**optimizer_args).minimize(loss)
    return main, start, loss


def _batches(vocab: int, steps: int, batch: int = 32):
    rng = np.random.default_rng(11)
    return [{"ids": rng.integers(0, vocab, size=(batch, 1)),  # repeats: merged once
             "y": rng.integers(0, 4, size=(batch, 1))} for _ in range(steps)]


def _train(opt: str, inplace: bool, vocab=300, dim=6, steps=4):
    main, start, loss = _build(opt, vocab, dim)
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(start, scope=scope)
    bs = fluid.BuildStrategy()
    bs.enable_inplace = inplace
    program = fluid.CompiledProgram(main, build_strategy=bs).with_data_parallel(
        loss_name=loss.name, places=[PLACE])
    batches = _batches(vocab, steps)
    for feed in batches:
        exe.run(program, feed=feed, fetch_list=[loss], scope=scope)
    state = {v.name: np.array(scope.find_var(v.name).get_tensor()).tobytes()
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None
             and scope.find_var(v.name).is_initialized()}
    plan = exe.plan_cache.find(program.data_parallel_program, list(batches[0]), [loss.name], 0)
    return state, plan.memory_report()


@pytest.mark.parametrize("opt", sorted(ROW_WISE))
def test_in_place_row_updates_are_bitwise_those_of_the_copying_path(opt):
    state, report = _train(opt, inplace=True)
    off_state, off_report = _train(opt, inplace=False)
    assert state == off_state
    table_arrays = ROW_WISE[opt][1]
    assert report.lent_last_run >= table_arrays  # the table and its state, lent
    assert off_report.lent_total == 0


@pytest.mark.parametrize("opt", sorted(ROW_WISE))
def test_a_sparse_step_allocates_no_buffer_of_the_tables_size(opt):
    vocab, dim = 100_000, 32  # 12.8 MB a table
    main, start, loss = _build(opt, vocab, dim)
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(start, scope=scope)
    batches = _batches(vocab, 4, batch=64)
    for feed in batches[:3]:  # the first step's table came from the startup run
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    tracemalloc.start()
    try:
        exe.run(main, feed=batches[3], fetch_list=[loss], scope=scope)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    table_bytes = vocab * dim * 4
    assert peak < table_bytes // 20, f"a step's peak allocation {peak} B, table {table_bytes} B"
    report = exe.plan_cache.find(main, list(batches[3]), [loss.name]).memory_report()
    assert report.lent_last_run >= ROW_WISE[opt][1]


@pytest.mark.parametrize("clip", sorted(CLIPS))
@pytest.mark.parametrize("opt", sorted(ROW_WISE))
def test_a_clipped_sparse_step_changes_its_rows_only_and_allocates_no_table(opt, clip):
    """Clipping a sparse gradient (by value, by norm, by the global norm) keeps the step a
    row update: only the looked-up rows of the table change, into the lent arrays, and no
    buffer of the table's size is made."""
    vocab, dim = 100_000, 32  # 12.8 MB a table
    with fluid.unique_name.guard():
        main, start, loss = _build(opt, vocab, dim, grad_clip=CLIPS[clip]())
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(start, scope=scope)
    batches = _batches(vocab, 4, batch=64)
    for feed in batches[:3]:
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    before = np.array(scope.find_var("embedding_0.w_0").get_tensor())
    tracemalloc.start()
    try:
        exe.run(main, feed=batches[3], fetch_list=[loss], scope=scope)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    after = np.asarray(scope.find_var("embedding_0.w_0").get_tensor())
    changed = np.flatnonzero((after != before).any(axis=1))
    looked_up = np.unique(batches[3]["ids"])
    assert changed.size and set(changed.tolist()) <= set(looked_up.tolist()), changed
    table_bytes = vocab * dim * 4
    assert peak < table_bytes // 20, f"a step's peak allocation {peak} B, table {table_bytes} B"
    report = exe.plan_cache.find(main, list(batches[3]), [loss.name]).memory_report()
    assert report.lent_last_run >= ROW_WISE[opt][1]


def _lent(*pairs) -> KernelContext:
    """A context lending each (output slot, array), as the plan does for one call."""
    ctx = KernelContext(rng=np.random.default_rng(0))
    ctx.lent = dict(pairs)
    return ctx


KERNEL_CASES = {  # op -> (state slots (in, out), attrs, extra inputs)
    "sgd": ((("Param", "ParamOut"),), {}, {}),
    "adam": ((("Param", "ParamOut"), ("Moment1", "Moment1Out"), ("Moment2", "Moment2Out")),
             {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": True},
             {"Beta1Pow": np.array([0.81], "float32"), "Beta2Pow": np.array([0.998], "float32")}),
    "adagrad": ((("Param", "ParamOut"), ("Moment", "MomentOut")), {"epsilon": 1e-6}, {}),
    "ftrl": ((("Param", "ParamOut"), ("SquaredAccumulator", "SquaredAccumOut"),
              ("LinearAccumulator", "LinearAccumOut")),
             {"l1": 0.01, "l2": 0.02, "lr_power": -0.5}, {}),
}


@pytest.mark.parametrize("op", sorted(KERNEL_CASES))
def test_the_lent_arrays_get_the_dense_formula_on_the_touched_rows_only(op):
    slots, attrs, extra = KERNEL_CASES[op]
    rng = np.random.default_rng(3)
    vocab, dim = 50, 4
    arrays = {s: (np.abs(rng.normal(size=(vocab, dim))) + 0.1).astype("float32")
              for s, _ in slots}
    before = {s: a.copy() for s, a in arrays.items()}
    g = SelectedRows(np.array([7, 3, 7, 41, 3, 7]),
                     rng.normal(size=(6, dim)).astype("float32"), vocab)
    ins = dict(arrays, Grad=g, LearningRate=np.array([0.1], "float32"), **extra)
    want = {o for _, o in slots}
    out = run_kernel(op, np, ins, attrs, want, _lent(*((o, arrays[s]) for s, o in slots)))
    dense = run_kernel(op, np, dict(ins, Grad=g.to_dense(np), **before), attrs, want)
    touched = [3, 7, 41]
    untouched = [r for r in range(vocab) if r not in touched]
    for s, o in slots:
        assert out[o] is arrays[s], f"{o}: written into the lent array"
        np.testing.assert_array_equal(out[o][untouched], before[s][untouched], err_msg=o)
        np.testing.assert_array_equal(out[o][touched], dense[o][touched], err_msg=o)


@pytest.mark.parametrize("op", sorted(KERNEL_CASES))
def test_without_a_loan_the_inputs_stay_as_they_were(op):
    slots, attrs, extra = KERNEL_CASES[op]
    rng = np.random.default_rng(4)
    arrays = {s: (np.abs(rng.normal(size=(20, 3))) + 0.1).astype("float32") for s, _ in slots}
    before = {s: a.copy() for s, a in arrays.items()}
    g = SelectedRows(np.array([2, 2, 5]), rng.normal(size=(3, 3)).astype("float32"), 20)
    ins = dict(arrays, Grad=g, LearningRate=np.array([0.1], "float32"), **extra)
    out = run_kernel(op, np, ins, attrs, {o for _, o in slots})
    for s, o in slots:
        np.testing.assert_array_equal(arrays[s], before[s])
        assert not np.shares_memory(out[o], arrays[s])


def test_duplicate_ids_are_merged_once_in_increasing_order():
    g = SelectedRows(np.array([9, 2, 9, 9, 0]), np.arange(10.0).reshape(5, 2), 12)
    merged = g.merged(np)
    assert merged.rows.tolist() == [0, 2, 9]
    np.testing.assert_array_equal(merged.value, [[8, 9], [2, 3], [0 + 4 + 6, 1 + 5 + 7]])


def test_a_merged_gradient_is_not_merged_again():
    """A clipped sparse gradient is merged for its clip; its update takes those rows as they
    are (merging is a sort of the batch's ids, done once)."""
    g = SelectedRows(np.array([4, 1, 4]), np.ones((3, 2)), 6)
    merged = g.merged(np)
    assert merged.is_merged and not g.is_merged
    assert merged.merged(np) is merged
    clipped = run_kernel("clip", np, {"X": g}, {"min": -0.5, "max": 0.5}, {"Out"})["Out"]
    assert clipped.is_merged and clipped.rows.tolist() == [1, 4]
    np.testing.assert_array_equal(clipped.value, [[0.5, 0.5], [0.5, 0.5]])


DENSE = {  # fluid's dense semantics on a sparse gradient (their docstrings say so)
    "momentum": lambda: fluid.optimizer.Momentum(0.2, momentum=0.9),
    "adam": lambda: fluid.optimizer.Adam(0.05),
}


@pytest.mark.parametrize("opt", sorted(DENSE) + ["lazy_adam"])
def test_momentum_and_adam_move_rows_a_step_did_not_look_up_lazy_adam_does_not(opt):
    """Row 0 is looked up in step 1 only: in step 2 the dense updates move it on (its
    velocity, its moments), lazy Adam leaves it as step 1 left it."""
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 5
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[10, 3], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="table"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(emb, 4), y))
        (DENSE.get(opt) or ROW_WISE["lazy_adam"][0])().minimize(loss)
    scope, exe = fluid.Scope(), fluid.Executor(PLACE)
    exe.run(start, scope=scope)
    rows = []
    for looked_up in ([[0]], [[1]]):
        exe.run(main, feed={"ids": np.array(looked_up), "y": np.array([[2]])}, scope=scope)
        rows.append(np.array(scope.find_var("table").get_tensor())[0].copy())
    assert (rows[0] != rows[1]).any() == (opt in DENSE)
