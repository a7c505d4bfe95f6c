"""The data-parallel passes, each checked by the structure of the program it produces: the
loss-gradient seed, all-reduce placement and buckets, inline collectives, Reduce mode's shard
plan (owners of whole parameters and of row chunks), its collectives and per-chunk optimize
ops, the check that collectives are waited for, the startup broadcast, fingerprints and
serialization of owners."""
from __future__ import annotations

import re

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.operator import OpRole
from spmd.errors import FeedError, InvalidArgumentError
from spmd.passes.allreduce import buckets, insert_allreduce
from spmd.passes.broadcast_params import broadcast_program
from spmd.passes.common import (
    check_waits,
    last_writer,
    mark_inline_collectives,
    trained_params_grads,
)
from spmd.passes.data_parallel import build_data_parallel
from spmd.passes.reduce_mode import apply_reduce_mode, assign_owners, plan_shards
from spmd.passes.scale_loss_grad import scale_loss_grad
from spmd.passes.state_sharding import StateSharding
from spmd.passes.strategy import BuildStrategy, GradientScaleStrategy, ReduceStrategy

COLLECTIVES = ("c_allreduce_sum", "c_reduce_sum", "c_broadcast", "c_reduce_scatter_owned")
UPDATE_OPS = ("sgd", "momentum", "adam")
MB = 1024 * 1024


# -- models ------------------------------------------------------------------------------------
def make_optimizer(name: str, clip: bool = False, decay: bool = False):
    kwargs = {}
    if clip:
        kwargs["grad_clip"] = fluid.clip.GradientClipByGlobalNorm(clip_norm=0.5)
    if decay:
        kwargs["regularization"] = fluid.regularizer.L2Decay(1e-3)
    if name == "sgd":
        return fluid.optimizer.SGD(0.1, **kwargs)
    if name == "momentum":
        return fluid.optimizer.Momentum(0.05, momentum=0.9, **kwargs)
    return fluid.optimizer.Adam(0.01, **kwargs)


def build(opt: str = "sgd", clip: bool = False, decay: bool = False, dtype: str = "float64",
          hidden=(16, 8), frozen: bool = False, mixed: bool = False):
    """(main, startup, loss): an MLP regressing y from x. `frozen` adds a layer whose weight is
    not trainable; `mixed` casts to float32 after the first layer (gradients of two dtypes)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 8], dtype)
        y = fluid.data("y", [None, 1], "float32" if mixed else dtype)
        h = x
        if frozen:
            h = fluid.layers.fc(h, 8, param_attr=fluid.ParamAttr(name="frozen_w",
                                                                 trainable=False),
                                bias_attr=False)
        for i, size in enumerate(hidden):
            h = fluid.layers.fc(h, size, act="tanh")
            if mixed and i == 0:
                h = fluid.layers.cast(h, "float32")
        pred = fluid.layers.fc(h, 1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        make_optimizer(opt, clip, decay).minimize(loss)
    return main, startup, loss


def strategy(reduce: bool = False, fuse: bool = False,
             scale: GradientScaleStrategy = GradientScaleStrategy.CoeffNumDevice,
             fuse_broadcast: bool | None = None):
    bs = BuildStrategy()
    bs.reduce_strategy = ReduceStrategy.Reduce if reduce else ReduceStrategy.AllReduce
    bs.fuse_all_reduce_ops = fuse
    bs.fuse_broadcast_ops = fuse if fuse_broadcast is None else fuse_broadcast
    bs.gradient_scale_strategy = scale
    return bs


def data_parallel(main, loss, n=2, bucket_mb=32.0, **kwargs):
    return build_data_parallel(main, strategy(**kwargs), n, loss.name, bucket_mb)


def ops_of(program, type_: str):
    return [(i, op) for i, op in enumerate(program.global_block().ops) if op.type == type_]


def loss_seed(program, loss):
    grad = program.grad_var_map[loss.name]
    seeds = [op for op in program.global_block().ops
             if op.role is OpRole.LOSS and grad in op.output_arg_names]
    return seeds


def nbytes(var) -> int:
    return int(np.prod(var.shape)) * np.dtype(var.dtype).itemsize


def last_compute_writer(block, name: str) -> int:
    """Index of the last op other than a collective that writes `name`."""
    return max(i for i, op in enumerate(block.ops)
               if name in op.output_arg_names and op.role is not OpRole.COMMUNICATE)


def assert_right_after(block, index: int, writer: int):
    """Op `index` follows op `writer` with only communication ops between them."""
    assert writer < index
    between = block.ops[writer + 1:index]
    assert all(op.role is OpRole.COMMUNICATE for op in between), [str(op) for op in between]


def expected_finishing_order(main) -> list[str]:
    """The trained gradients sorted by the index of their last writer in the source program."""
    block = main.global_block()
    last = last_writer(block)
    trained = {op.input("Grad")[0] for op in block.ops if op.type in UPDATE_OPS}
    return sorted(trained, key=lambda g: last[g])


# -- scale_loss_grad ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 4])
def test_coeff_num_device_seeds_one_over_n(n):
    main, _, loss = build()
    program, _ = data_parallel(main, loss, n=n)
    (seed,) = loss_seed(program, loss)
    assert seed.type == "fill_constant"
    assert seed.attr("value") == pytest.approx(1.0 / n)
    (original,) = loss_seed(main, loss)
    assert original.attr("value") == 1.0  # the source program is left as it was


def test_one_keeps_the_seed_at_one():
    main, _, loss = build()
    program, _ = data_parallel(main, loss, n=4, scale=GradientScaleStrategy.One)
    (seed,) = loss_seed(program, loss)
    assert seed.attr("value") == 1.0


def test_customized_removes_the_seed_so_loss_grad_is_fed():
    main, startup, loss = build()
    grad = main.grad_var_map[loss.name]
    program, _ = data_parallel(main, loss, n=1, scale=GradientScaleStrategy.Customized)
    block = program.global_block()
    assert loss_seed(program, loss) == []
    assert not any(grad in op.output_arg_names for op in block.ops)
    assert block.vars[grad].is_data
    assert not main.global_block().vars[grad].is_data

    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 8)), "y": rng.standard_normal((4, 1))}
    exe = fluid.Executor(fluid.CPUPlace())
    got, want = fluid.Scope(), fluid.Scope()
    exe.run(startup, scope=want)
    for name in want.local_var_names():
        got.var(name).get_tensor().set(np.array(want.find_var(name).get_tensor()))
    with pytest.raises(FeedError, match=re.escape(grad) + ".*must be fed"):
        exe.run(program, feed=feed, fetch_list=[loss], scope=got)

    # fed with 1.0 it trains exactly as the source program does
    exe.run(program, feed=dict(feed, **{grad: np.ones(1)}), fetch_list=[loss], scope=got)
    exe.run(main, feed=feed, fetch_list=[loss], scope=want)
    for p in main.all_parameters():
        np.testing.assert_array_equal(np.array(got.find_var(p.name).get_tensor()),
                                      np.array(want.find_var(p.name).get_tensor()))


def test_wrong_loss_name_is_a_clear_error():
    main, _, _ = build()
    with pytest.raises(InvalidArgumentError, match=r"loss_name 'no_such_loss'.*minimize"):
        build_data_parallel(main, strategy(), 2, "no_such_loss", 32.0)
    with pytest.raises(InvalidArgumentError, match="no_such_loss"):
        scale_loss_grad(main.clone(), "no_such_loss", GradientScaleStrategy.One, 2)


# -- AllReduce ---------------------------------------------------------------------------------
def test_unfused_allreduce_one_per_gradient_right_after_its_last_writer():
    main, _, loss = build(frozen=True)
    program, layout = data_parallel(main, loss, n=2)
    assert layout is None  # only Reduce mode places optimizer state
    block = program.global_block()
    pairs = trained_params_grads(main)
    grads = [g for _, g in pairs]
    assert "frozen_w" not in [p.name for p, _ in pairs]
    assert len(grads) == 6  # three fc layers, weight and bias each

    allreduces = ops_of(program, "c_allreduce_sum")
    assert [op.input("X") for _, op in allreduces] == [[g] for g in grads]
    for i, op in allreduces:
        (g,) = op.input("X")
        assert op.output("Out") == [g]
        assert op.role is OpRole.COMMUNICATE
        assert op.owner is None
        assert_right_after(block, i, last_compute_writer(block, g))
        # in an MLP no backward op finishes two parameters' gradients: right after it
        assert g in block.ops[i - 1].output_arg_names

    # gradients in the order the backward pass finishes them
    assert grads == expected_finishing_order(main)
    assert grads[0].startswith("fc_3.b_0") and grads[-1].startswith("fc_1.w_0")

    (sync_index, sync), = ops_of(program, "c_sync_comm_stream")
    first_optimize = next(i for i, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE)
    assert sync_index == first_optimize - 1
    assert sync.role is OpRole.COMMUNICATE
    assert sync.input("X") == grads and sync.output("Out") == grads
    # every allreduce is issued before the wait, and the source program has no collective
    assert all(i < sync_index for i, _ in allreduces)
    assert not any(op.role is OpRole.COMMUNICATE for op in main.global_block().ops)


def test_one_device_gets_no_collectives():
    main, _, loss = build()
    program, _ = data_parallel(main, loss, n=1)
    assert not [op for op in program.global_block().ops if op.role is OpRole.COMMUNICATE]
    assert len(program.global_block().ops) == len(main.global_block().ops)


def _buckets(program) -> list[list[str]]:
    return [op.input("X") for _, op in ops_of(program, "c_allreduce_sum")]


@pytest.mark.parametrize("mixed", [False, True])
def test_fused_allreduce_small_buckets(mixed):
    main, _, loss = build(hidden=(32, 32, 32), mixed=mixed)
    block_src = main.global_block()
    sizes = {g: nbytes(block_src.vars[g]) for _, g in trained_params_grads(main)}
    bucket_mb = 5000 / MB  # a 32x32 weight gradient: 8192 bytes, 4096 in float32
    program, _ = data_parallel(main, loss, n=2, bucket_mb=bucket_mb, fuse=True)
    block = program.global_block()
    buckets = _buckets(program)
    assert len(buckets) > 2
    # the buckets partition the gradients, in finishing order
    assert [g for b in buckets for g in b] == [g for _, g in trained_params_grads(main)]
    dtypes = [{block.vars[g].dtype for g in b} for b in buckets]
    assert all(len(d) == 1 for d in dtypes)
    if mixed:
        assert {d for s in dtypes for d in s} == {"float32", "float64"}
    limit = bucket_mb * MB
    for k, bucket in enumerate(buckets):
        total = sum(sizes[g] for g in bucket)
        assert total <= limit or len(bucket) == 1
        if k + 1 < len(buckets):  # filled greedily: the next gradient did not fit
            nxt = buckets[k + 1][0]
            assert (total + sizes[nxt] > limit
                    or block.vars[nxt].dtype != block.vars[bucket[0]].dtype)
    for i, op in ops_of(program, "c_allreduce_sum"):
        writer = max(last_compute_writer(block, g) for g in op.input("X"))
        assert_right_after(block, i, writer)
        assert op.output("Out") == op.input("X")


def test_fused_allreduce_large_bucket_is_one_collective():
    main, _, loss = build(hidden=(32, 32, 32))
    program, _ = data_parallel(main, loss, n=2, bucket_mb=32.0, fuse=True)
    (bucket,) = _buckets(program)
    assert bucket == [g for _, g in trained_params_grads(main)]
    (i, _), = ops_of(program, "c_allreduce_sum")
    block = program.global_block()
    assert_right_after(block, i, max(last_compute_writer(block, g) for g in bucket))


def test_insert_allreduce_directly():
    main, _, _ = build()
    program = main.clone()
    pairs = trained_params_grads(program)
    insert_allreduce(program, pairs, fuse=True, bucket_mb=32.0)
    (_, op), = ops_of(program, "c_allreduce_sum")
    assert op.input("X") == [g for _, g in pairs]
    assert len(ops_of(program, "c_sync_comm_stream")) == 1


# -- inline collectives ------------------------------------------------------------------------
def expected_inline(block) -> dict[int, bool]:
    """For every collective: no compute op lies between it and the next c_sync_comm_stream."""
    out = {}
    for i, op in enumerate(block.ops):
        if op.type not in COLLECTIVES:
            continue
        inline = True
        for later in block.ops[i + 1:]:
            if later.type == "c_sync_comm_stream":
                break
            if later.role is not OpRole.COMMUNICATE:
                inline = False
                break
        out[i] = inline
    return out


@pytest.mark.parametrize("reduce,fuse", [(False, False), (False, True), (True, False),
                                         (True, True)])
def test_use_calc_stream_exactly_when_nothing_can_overlap(reduce, fuse):
    main, _, loss = build(opt="adam", clip=True, decay=True)
    program, _ = data_parallel(main, loss, n=3, bucket_mb=1000 / MB, reduce=reduce, fuse=fuse)
    block = program.global_block()
    want = expected_inline(block)
    got = {i: block.ops[i].attr("use_calc_stream") for i in want}
    assert got == want
    assert True in got.values() and False in got.values()


def test_mark_inline_collectives_on_a_hand_made_block():
    main, _, _ = build()
    program = main.clone()
    block = program.global_block()
    pairs = trained_params_grads(program)
    first, last = pairs[0], pairs[-1]
    # the first gradient finished is followed by more backward ops before the wait, the last
    # one by the wait alone
    insert_allreduce(program, [first, last], fuse=False, bucket_mb=32.0)
    # after the updates: a broadcast followed by compute, then two broadcasts at the end
    param = first[0].name
    for _ in range(3):
        block.append_op("c_broadcast", {"X": [param]}, {"Out": [param]}, {"root": 0},
                        role=OpRole.COMMUNICATE)
    update = block.ops.pop(next(i for i, op in enumerate(block.ops) if op.type == "sgd"))
    block.ops.insert(len(block.ops) - 2, update)
    mark_inline_collectives(block)
    flags = [(op.type, op.attr("use_calc_stream")) for op in block.ops
             if op.type in COLLECTIVES]
    assert flags == [("c_allreduce_sum", False), ("c_allreduce_sum", True),
                     ("c_broadcast", False), ("c_broadcast", True), ("c_broadcast", True)]
    assert flags == [(block.ops[i].type, v) for i, v in sorted(expected_inline(block).items())]


# -- Reduce mode: owners -----------------------------------------------------------------------
def _params(shapes: dict, dtypes: dict | None = None):
    """Parameters of the given shapes (an int is a 1-D shape), float64 unless `dtypes` says."""
    block = fluid.Program().global_block()
    dtypes = dtypes or {}
    return [block.create_parameter(name, (s,) if isinstance(s, int) else s,
                                   dtypes.get(name, "float64")) for name, s in shapes.items()]


def summary(plan) -> dict:
    """param -> its owner when whole, else [(rows, owner) for each chunk]."""
    return {name: shards[0].owner if shards[0].rows is None
            else [(s.rows, s.owner) for s in shards] for name, shards in plan.items()}


def check_plan(params, plan, nranks: int):
    """What holds for every plan: every parameter is there, cut into N chunks exactly when it
    holds more than 1/(2N) of the bytes and has at least N rows, the chunks covering its rows
    in order, each chunk non-empty and the chunks within a row of each other."""
    total = sum(nbytes(p) for p in params)
    assert set(plan) == {p.name for p in params}
    for p in params:
        shards = plan[p.name]
        assert [s.index for s in shards] == list(range(len(shards)))
        assert all(s.param == p.name and 0 <= s.owner < nranks for s in shards)
        if nranks > 1 and p.shape[0] >= nranks and nbytes(p) * 2 * nranks > total:
            assert len(shards) == nranks, p.name
            bounds = [s.rows for s in shards]
            assert bounds[0][0] == 0 and bounds[-1][1] == p.shape[0]
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            sizes = [b - a for a, b in bounds]
            assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1, sizes
            assert [s.name("v") for s in shards] == [f"v@SHARD{c}" for c in range(nranks)]
        else:
            assert len(shards) == 1 and shards[0].rows is None, p.name
            assert shards[0].name("v") == "v"


def test_plan_shards_greedy_by_bytes_over_chunks_and_whole_params():
    params = _params({"small": 10, "big": 100, "mid_a": 50, "mid_b": 60, "quarter": 40})
    # 2 ranks: only big holds more than 1/4 of the 260 elements: two chunks of 50.
    # mid_b 60 -> 0; big#0 50 -> 1; big#1 50 -> 1 (50 < 60); mid_a 50 -> 0 (60 < 100);
    # quarter 40 -> 1 (100 < 110); small 10 -> 0 (110 < 140)
    plan = plan_shards(params, 2)
    check_plan(params, plan, 2)
    assert summary(plan) == {"mid_b": 0, "big": [((0, 50), 1), ((50, 100), 1)], "mid_a": 0,
                             "quarter": 1, "small": 0}
    assert assign_owners(params, 2) == {"mid_b": 0, "mid_a": 0, "quarter": 1, "small": 0}
    # 3 ranks: big, mid_b and mid_a hold more than 1/6; big's rows 0,33,67,100 (33, 34, 33),
    # mid_a's 0,17,33,50 (17, 16, 17), mid_b's 20 each. In order:
    # quarter 40 -> 0 [40,0,0]; big#1 34 -> 1 [40,34,0]; big#0 33 -> 2 [40,34,33];
    # big#2 33 -> 2 [40,34,66]; mid_b#0 -> 1 [40,54,66]; mid_b#1 -> 0 [60,54,66];
    # mid_b#2 -> 1 [60,74,66]; mid_a#0 17 -> 0 [77,74,66]; mid_a#2 17 -> 2 [77,74,83];
    # mid_a#1 16 -> 1 [77,90,83]; small 10 -> 0 [87,90,83]
    plan = plan_shards(params, 3)
    check_plan(params, plan, 3)
    assert summary(plan) == {
        "quarter": 0, "big": [((0, 33), 2), ((33, 67), 1), ((67, 100), 2)],
        "mid_b": [((0, 20), 1), ((20, 40), 0), ((40, 60), 1)],
        "mid_a": [((0, 17), 0), ((17, 33), 1), ((33, 50), 2)], "small": 0}
    assert assign_owners(params, 3) == {"quarter": 0, "small": 0}
    for n in (2, 3):  # the order the parameters come in does not matter
        assert plan_shards(list(reversed(params)), n) == plan_shards(params, n)


def test_plan_shards_ties_by_name_then_chunk_index_then_lowest_rank():
    # one row each: never cut
    params = _params({"b": (1, 8), "a": (1, 8), "d": (1, 8), "c": (1, 8)})
    assert summary(plan_shards(params, 3)) == {"a": 0, "b": 1, "c": 2, "d": 0}
    assert assign_owners(params, 3) == {"a": 0, "b": 1, "c": 2, "d": 0}
    assert assign_owners(params, 1) == {"a": 0, "b": 0, "c": 0, "d": 0}
    # w (2 rows of 16) is cut in two; three items of 16 elements: by name, then chunk index
    params = _params({"w": (2, 16), "a": (1, 16)})
    assert summary(plan_shards(params, 2)) == {"a": 0, "w": [((0, 1), 1), ((1, 2), 0)]}
    assert assign_owners(params, 2) == {"a": 0}
    params = _params({"w": (2, 16), "z": (1, 16)})
    assert summary(plan_shards(params, 2)) == {"w": [((0, 1), 0), ((1, 2), 1)], "z": 0}
    assert assign_owners(params, 2) == {"z": 0}


def test_plan_shards_cuts_only_large_parameters_with_enough_rows():
    def cut(shapes, nranks, dtypes=None):
        params = _params(shapes, dtypes)
        plan = plan_shards(params, nranks)
        check_plan(params, plan, nranks)
        return {name for name, shards in plan.items() if shards[0].rows is not None}

    # exactly 1/(2N) of the bytes is not more than it; one element more is
    assert cut({"p": (4, 4), "q": (1, 48)}, 2) == set()  # p: 128 of 512 bytes
    assert cut({"p": (4, 4), "q": (1, 47)}, 2) == {"p"}  # 128 of 504
    # bytes, not elements: 32 float32 elements of 80 are 128 of 512 bytes
    assert cut({"p": (4, 8), "q": (1, 48)}, 2, {"p": "float32"}) == set()
    assert cut({"p": (4, 9), "q": (1, 48)}, 2, {"p": "float32"}) == {"p"}
    # q holds 3/4 of the bytes but has one row; p has 2 rows: enough for 2 ranks, not 3
    assert cut({"p": (2, 100), "q": (1, 10)}, 2) == {"p"}
    assert cut({"p": (2, 100), "q": (1, 10)}, 3) == set()
    assert cut({"p": (3, 100), "q": (1, 10)}, 3) == {"p"}
    # a 1-D parameter is cut along its only axis; one rank cuts nothing
    assert cut({"bias": 64, "w": (4, 4)}, 2) == {"bias"}
    assert cut({"bias": 64, "w": (4, 4)}, 1) == set()
    # a lone parameter: one chunk per rank
    assert summary(plan_shards(_params({"w": (6, 4)}), 3)) == {
        "w": [((0, 2), 0), ((2, 4), 1), ((4, 6), 2)]}


def test_plan_shards_chunk_rows_cover_each_parameter_exactly():
    for nranks in range(2, 8):
        for rows in range(nranks, 4 * nranks + 6):
            params = _params({"w": (rows, 3), "b": 1})
            check_plan(params, plan_shards(params, nranks), nranks)
            assert len(plan_shards(params, nranks)["w"]) == nranks


def _greedy_order(plan, params):
    """The plan's items as the greedy pass takes them: (-bytes, name, chunk index)."""
    size = {p.name: nbytes(p) for p in params}
    rows = {p.name: p.shape[0] for p in params}
    items = [(-(size[s.param] if s.rows is None
                else size[s.param] * (s.rows[1] - s.rows[0]) // rows[s.param]), s.param, s.index)
             for shards in plan.values() for s in shards]
    return sorted(items)


def test_layout_is_deterministic_and_the_largest_item_goes_to_rank_0():
    layouts = []
    for _ in range(2):
        main, _, loss = build(opt="adam", hidden=(32, 16))
        program, layout = data_parallel(main, loss, n=3, reduce=True)
        layouts.append(layout)
    assert layouts[0] == layouts[1]
    params = [p for p, _ in trained_params_grads(main)]
    shards = layouts[0].shards
    assert shards == plan_shards(params, 3)
    check_plan(params, shards, 3)
    # fc_0.w_0 (256 of 833 elements) and fc_1.w_0 (512) are cut, the rest kept whole
    assert {n for n, s in shards.items() if s[0].rows is not None} == {"fc_0.w_0", "fc_1.w_0"}
    _, name, index = _greedy_order(shards, params)[0]
    assert (name, index) == ("fc_1.w_0", 0)  # rows 0-11 of 32x16: 176 elements
    assert shards[name][index].owner == 0
    assert {s.owner for ss in shards.values() for s in ss} == {0, 1, 2}


def dominant_mlp():
    """(main, loss): Adam on x(12) -> fc 256 -> fc 1, whose first weight holds 86% of the
    parameter bytes."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 12], "float64")
        y = fluid.data("y", [None, 1], "float64")
        h = fluid.layers.fc(x, 256, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.Adam(0.01).minimize(loss)
    return main, loss


@pytest.mark.parametrize("n", [2, 3])
def test_reduce_mode_spreads_optimizer_state_evenly(n):
    main, loss = dominant_mlp()
    program, layout = data_parallel(main, loss, n=n, reduce=True)
    block = program.global_block()
    assert set(layout.state_owner) == {s for names in program.optimizer_state.values()
                                       for s in names}
    per_rank = [0] * n
    for var, rank in layout.state_owner.items():
        per_rank[rank] += nbytes(block.vars[var])
    total = sum(per_rank)
    for rank, held in enumerate(per_rank):
        assert abs(held - total / n) <= 0.2 * total / n, (rank, per_rank)
    # whole parameters could not do it: the big weight's state alone is far above 1/N
    big = sum(nbytes(main.global_block().vars[s]) for s in main.optimizer_state["fc_0.w_0"])
    assert big > 1.2 * total / n
    assert len(layout.shards["fc_0.w_0"]) == n


# -- Reduce mode: the graph --------------------------------------------------------------------
def optimize_chain(block, seeds, skip=()):
    """(ops, names): the optimize ops that read `seeds` or, transitively, what such ops write,
    in program order (ops whose id is in `skip` excluded), and every name they reach."""
    names, chain = set(seeds), []
    for op in block.ops:
        if (op.role is OpRole.OPTIMIZE and id(op) not in skip
                and names.intersection(op.input_arg_names)):
            chain.append(op)
            names.update(op.output_arg_names)
    return chain, names


def renamed(names, chain_names, suffix):
    return [n + suffix if n in chain_names else n for n in names]


def check_reduce_graph(main, loss, opt, n):
    before = {k: list(v) for k, v in main.optimizer_state.items()}
    program, layout = data_parallel(main, loss, n=n, reduce=True)
    block, src = program.global_block(), main.global_block()
    pairs = trained_params_grads(main)
    shards = layout.shards
    assert shards == plan_shards([p for p, _ in pairs], n)
    chunked = [p.name for p, _ in pairs if shards[p.name][0].rows is not None]
    assert chunked and len(chunked) < len(pairs)  # both kinds are checked below
    state = {p.name: main.optimizer_state.get(p.name, []) for p, _ in pairs}
    assert len(ops_of(program, "c_allreduce_sum")) == 1  # the global norm's, below

    # gradients: reduced to their owners (a chunked one cut first), right after the last write
    reduces = ops_of(program, "c_reduce_sum")
    assert [op.input("X") for _, op in reduces] == [[s.name(g)] for p, g in pairs
                                                   for s in shards[p.name]]
    roots = [s.owner for p, _ in pairs for s in shards[p.name]]
    assert [op.attr("root_id") for _, op in reduces] == roots
    for _, op in reduces:
        assert op.role is OpRole.COMMUNICATE and op.output("Out") == op.input("X")
    for p, g in pairs:
        writer = last_compute_writer(block, g)
        if p.name not in chunked:
            (i,) = [i for i, op in reduces if op.input("X") == [g]]
            assert_right_after(block, i, writer)
            continue
        after = block.ops[writer + 1:writer + 1 + 2 * n]
        assert len(shards[p.name]) == n and len(after) == 2 * n
        for s, cut, reduce in zip(shards[p.name], after[::2], after[1::2]):
            chunk = s.name(g)
            assert chunk == f"{g}@SHARD{s.index}"
            assert cut.type == "slice" and cut.role is OpRole.BACKWARD and cut.owner is None
            assert cut.input("Input") == [g] and cut.output("Out") == [chunk]
            assert (cut.attr("axes"), cut.attr("starts"), cut.attr("ends")) == (
                [0], [s.rows[0]], [s.rows[1]])
            assert reduce.type == "c_reduce_sum" and reduce.input("X") == [chunk]
            assert reduce.attr("root_id") == s.owner
            rows = s.rows[1] - s.rows[0]
            assert tuple(block.vars[chunk].shape) == (rows,) + tuple(p.shape[1:])
    reduced = [s.name(g) for p, g in pairs for s in shards[p.name]]
    (sync_index, sync), = [(i, op) for i, op in ops_of(program, "c_sync_comm_stream")
                           if op.input("X") == reduced]
    assert all(i < sync_index for i, _ in reduces)

    # the optimize region opens with every owner slicing its rows of the chunked parameters
    opening = [(p.name, s) for p, _ in pairs for s in shards[p.name] if s.rows is not None]
    slices = block.ops[sync_index + 1:sync_index + 1 + len(opening)]
    for (name, s), op in zip(opening, slices):
        assert op.type == "slice" and op.role is OpRole.OPTIMIZE and op.owner == s.owner
        assert op.input("Input") == [name] and op.output("Out") == [s.name(name)]
        assert (op.attr("starts"), op.attr("ends")) == ([s.rows[0]], [s.rows[1]])
    assert block.ops[sync_index + 1 + len(opening)].role is OpRole.OPTIMIZE

    # the global norm: one sum of every parameter's or chunk's term, with no owner, completed
    # by an allreduce and its wait
    (src_sum,) = [op for _, op in ops_of(main, "sum") if len(op.input("X")) == len(pairs)]
    (k, norm_sum), = [(i, op) for i, op in ops_of(program, "sum")
                      if op.output("Out") == src_sum.output("Out")]
    assert norm_sum.owner is None and norm_sum.role is OpRole.OPTIMIZE
    terms = []
    for term in src_sum.input("X"):  # a parameter's squared norm, or one per chunk
        (name,) = [p.name for p, _ in pairs if term.startswith(p.name + "_")]
        terms += [s.name(term) for s in shards[name]]
    assert norm_sum.input("X") == terms and len(terms) == len(reduced)
    out = norm_sum.output("Out")
    assert block.ops[k + 1].type == "c_allreduce_sum" and block.ops[k + 1].input("X") == out
    assert block.ops[k + 2].type == "c_sync_comm_stream" and block.ops[k + 2].input("X") == out
    assert block.ops[k + 3].type == "sqrt" and block.ops[k + 3].owner is None

    # the tail: a broadcast of each parameter or chunk from its owner, a wait, the concats
    pieces = [(s.name(p.name), s.owner) for p, _ in pairs for s in shards[p.name]]
    bcasts = ops_of(program, "c_broadcast")
    assert [(op.input("X"), op.attr("root")) for _, op in bcasts] == [
        ([name], owner) for name, owner in pieces]
    tail = block.ops[len(block.ops) - len(bcasts) - 1 - len(chunked):]
    assert [id(op) for op in tail[:len(bcasts)]] == [id(op) for _, op in bcasts]
    chunk_names = [s.name(p) for p in chunked for s in shards[p]]
    assert tail[len(bcasts)].type == "c_sync_comm_stream"
    assert tail[len(bcasts)].input("X") == chunk_names
    concats = tail[len(bcasts) + 1:]
    assert len(concats) == len(chunked)
    for name, op in zip(chunked, concats):
        assert op.type == "concat" and op.role is OpRole.OPTIMIZE and op.owner is None
        assert op.input("X") == [s.name(name) for s in shards[name]]
        assert op.output("Out") == [name] and op.attr("axis") == 0

    # every optimize op of a parameter (regularization, clipping terms, update) runs on its
    # owner; a chunked parameter's are cloned once per chunk onto the chunk's names
    src_skip = {id(src_sum)}
    skip = {id(norm_sum)} | {id(op) for op in concats}
    for p, g in pairs:
        src_chain, src_names = optimize_chain(src, {g, p.name, *state[p.name]}, src_skip)
        kinds = [op.type for op in src_chain]
        assert {"squared_l2_norm", "elementwise_mul", "scale", "sum", opt} <= set(kinds), kinds
        for s in shards[p.name]:
            suffix = "" if s.rows is None else f"@SHARD{s.index}"
            seeds = renamed([g, p.name, *state[p.name]], src_names, suffix)
            chain, _ = optimize_chain(block, seeds, skip)
            assert [op.type for op in chain] == kinds, (p.name, s)
            for src_op, op in zip(src_chain, chain):
                assert op.owner == s.owner, str(op)
                assert op.attrs == src_op.attrs
                for slot, names in src_op.inputs.items():
                    assert op.input(slot) == renamed(names, src_names, suffix), str(op)
                for slot, names in src_op.outputs.items():
                    assert op.output(slot) == renamed(names, src_names, suffix), str(op)
        if p.name in chunked:  # nothing else is left on the whole parameter
            whole = {p.name, g, *state[p.name]}
            touching = [id(op) for op in block.ops if op.role is OpRole.OPTIMIZE
                        and whole.intersection(op.input_arg_names + op.output_arg_names)]
            mine = [op for (name, _), op in zip(opening, slices) if name == p.name]
            assert touching == [id(op) for op in mine] + [id(concats[chunked.index(p.name)])]
            assert not any(set(state[p.name]).intersection(op.input_arg_names
                                                           + op.output_arg_names)
                           for op in block.ops)

    # optimizer state: chunk state in place of the whole for chunked parameters, each state
    # variable owned (and written only) by its parameter's or chunk's owner
    want_owner, want_source, want_state = {}, {}, {}
    for p, _ in pairs:
        want_state[p.name] = []
        for var in state[p.name]:
            for s in shards[p.name]:
                want_owner[s.name(var)] = s.owner
                want_state[p.name].append(s.name(var))
                if s.rows is not None:
                    same_rows = tuple(src.vars[var].shape) == tuple(p.shape)
                    want_source[s.name(var)] = (var, s.rows if same_rows else None)
                    rows = s.rows[1] - s.rows[0]
                    shape = (rows,) + tuple(p.shape[1:]) if same_rows else src.vars[var].shape
                    assert tuple(block.vars[s.name(var)].shape) == tuple(shape)
                    assert block.vars[s.name(var)].persistable
    assert layout.state_owner == want_owner
    assert layout.state_source == want_source
    assert {k: v for k, v in program.optimizer_state.items() if k in want_state} == want_state
    assert main.optimizer_state == before  # the source program is left as it was
    for var, owner in want_owner.items():
        writers = [op for op in block.ops if var in op.output_arg_names]
        assert writers and all(op.owner == owner for op in writers), var
    if opt == "sgd":
        assert want_owner == {}
    else:
        assert set(want_owner.values()) == set(range(n))


@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_reduce_mode_graph(opt):
    for n in (2, 3):
        main, _, loss = build(opt=opt, clip=True, decay=True)
        check_reduce_graph(main, loss, opt, n)


@pytest.mark.parametrize("mixed", [False, True])
def test_reduce_mode_fused_broadcast_one_per_owner_and_dtype(mixed):
    main, _, loss = build(opt="adam", mixed=mixed)
    # fused gradients with mixed dtypes fall back to per-piece reduces and broadcasts
    program, layout = data_parallel(main, loss, n=3, reduce=True, fuse=mixed,
                                    fuse_broadcast=True)
    assert not ops_of(program, "c_reduce_scatter_owned")
    block = program.global_block()
    pairs = trained_params_grads(main)
    pieces = [(s.name(p.name), s.owner, p.dtype) for p, _ in pairs
              for s in layout.shards[p.name]]
    bcasts = [op for _, op in ops_of(program, "c_broadcast")]
    keys = []
    for op in bcasts:
        names = op.input("X")
        (dtype,) = {block.vars[n].dtype for n in names}
        keys.append((op.attr("root"), dtype))
        # everything that owner updated in that dtype, in the order of the unfused broadcasts
        assert names == [name for name, owner, d in pieces if (owner, d) == keys[-1]]
        assert op.output("Out") == names
    assert keys == sorted(set(keys))  # one broadcast per (owner, dtype), in that order
    assert {(owner, d) for _, owner, d in pieces} == set(keys)
    assert {k[0] for k in keys} == {0, 1, 2}
    if mixed:
        assert {k[1] for k in keys} == {"float32", "float64"}
    chunked = [p.name for p, _ in pairs if layout.shards[p.name][0].rows is not None]
    assert chunked
    tail = block.ops[-(len(bcasts) + 1 + len(chunked)):]
    assert [id(op) for op in tail[:len(bcasts)]] == [id(op) for op in bcasts]
    assert tail[len(bcasts)].type == "c_sync_comm_stream"
    assert [(op.type, op.output("Out")) for op in tail[len(bcasts) + 1:]] == [
        ("concat", [name]) for name in chunked]


def column_scaled(main):
    """`main` with an update chain that broadcasts along an axis (the largest gradient times a
    per-column scale): flat pieces could not run it, so fused Reduce mode keeps row chunks."""
    block = main.global_block()
    p, g = max(trained_params_grads(main), key=lambda pg: np.prod(pg[0].shape))
    scale = block.create_var(name="column_scale", shape=[p.shape[1]], dtype=p.dtype,
                             persistable=True)
    block.append_op("elementwise_mul", {"X": [g], "Y": [scale.name]}, {"Out": ["scaled"]},
                    {"axis": 1}, role=OpRole.OPTIMIZE)
    return main


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_fused_reduce_mode_is_one_reduce_scatter_and_one_allgather_over_flat_sections(opt):
    """Every update elementwise: the gradients, end to end in parameter order, are cut into n
    equal sections of elements; one reduce-scatter of them, the owners update flat views of
    their pieces, one all-gather gives the whole parameters back (no slice, no concat)."""
    n = 3
    main, _, loss = build(opt=opt, clip=True)
    program, layout = data_parallel(main, loss, n=n, reduce=True, fuse=True)
    block = program.global_block()
    pairs = trained_params_grads(main)
    shards = layout.shards
    pieces = [s for p, _ in pairs for s in shards[p.name]]
    assert any(s.flat is not None for s in pieces) and all(s.rows is None for s in pieces)
    for gone in ("c_reduce_sum", "c_broadcast", "concat", "slice", "c_allgather_owned"):
        assert not ops_of(program, gone), gone
    ((i, rs),) = ops_of(program, "c_reduce_scatter_owned")
    assert rs.input("X") == [g for _, g in pairs]
    assert rs.attr("flat") and rs.attr("nranks") == n
    assert rs.output("Out") == [s.name(g) for p, g in pairs for s in shards[p.name]]
    # owners 0..n-1 in order, each holding one section of ceil(total / n) elements
    owners = rs.attr("owners")
    assert owners == sorted(owners) == [s.owner for s in pieces]
    total = sum(int(np.prod(p.shape)) for p, _ in pairs)
    section = -(-total // n)
    held = [0] * n
    for name, owner in zip(rs.output("Out"), owners):
        held[owner] += int(np.prod(block.vars[name].shape))
    assert held == [section] * (n - 1) + [total - section * (n - 1)]
    assert all(len(block.vars[s.name(g)].shape) == 1 for p, g in pairs
               for s in shards[p.name] if s.cut)
    # each owner reads flat views of its pieces of the parameters
    views = {op.output("Out")[0]: op for _, op in ops_of(program, "flat_slice")}
    assert set(views) == {s.name(p.name) for p, _ in pairs for s in shards[p.name] if s.cut}
    for p, _ in pairs:
        for s in shards[p.name]:
            if s.cut:
                op = views[s.name(p.name)]
                assert op.owner == s.owner and (op.attr("start"), op.attr("end")) == s.flat
    # parameters: one all-gather right after the last update, whole parameters out
    ((k, ag),) = ops_of(program, "c_allgather_flat")
    assert ag.input("X") == [s.name(p.name) for p, _ in pairs for s in shards[p.name]]
    assert ag.output("Out") == [p.name for p, _ in pairs]
    assert ag.attr("owners") == owners
    assert ag.attr("counts") == [len(shards[p.name]) for p, _ in pairs]
    last_update = max(j for j, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE)
    assert i < min(j for j, op in enumerate(block.ops) if op.type in UPDATE_OPS)
    assert k == last_update + 1
    check_waits(block)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_fused_reduce_mode_keeps_row_chunks_where_an_update_broadcasts_along_an_axis(opt):
    n = 3
    main, _, loss = build(opt=opt, clip=True)
    program, layout = data_parallel(column_scaled(main), loss, n=n, reduce=True, fuse=True)
    block = program.global_block()
    pairs = trained_params_grads(main)
    shards = layout.shards
    assert any(shards[p.name][0].rows is not None for p, _ in pairs)  # chunks included
    assert not ops_of(program, "c_reduce_sum") and not ops_of(program, "c_broadcast")
    # gradients: one reduce-scatter after the last one (and its chunks) is written
    ((i, rs),) = ops_of(program, "c_reduce_scatter_owned")
    grads = [g for _, g in pairs]
    pieces_of_grads = [s.name(g) for p, g in pairs for s in shards[p.name]]
    # whole gradients in; pieces out, chunks cut by rows while packing (no slice ops)
    assert rs.input("X") == grads and rs.output("Out") == pieces_of_grads
    assert rs.attr("owners") == [s.owner for p, _ in pairs for s in shards[p.name]]
    assert rs.attr("sources") == [k for k, (p, _) in enumerate(pairs) for _ in shards[p.name]]
    rows = [s.rows or (-1, -1) for p, _ in pairs for s in shards[p.name]]
    assert list(zip(rs.attr("starts"), rs.attr("ends"))) == rows
    assert rs.role is OpRole.COMMUNICATE and rs.owner is None
    for k, name in enumerate(pieces_of_grads):
        shape = list(block.vars[grads[rs.attr("sources")[k]]].shape)
        if rows[k][0] >= 0:
            shape[0] = rows[k][1] - rows[k][0]
        assert list(block.vars[name].shape) == shape
    assert not [op for op in block.ops if op.type == "slice" and op.role is OpRole.BACKWARD]
    writers = [j for j, op in enumerate(block.ops) if set(op.output_arg_names) & set(grads)
               and op.role is not OpRole.COMMUNICATE]
    assert max(writers) < i
    first_update = min(j for j, op in enumerate(block.ops) if op.type in UPDATE_OPS)
    assert i < first_update
    # parameters: one all-gather right after the last update, then the chunks concatenated
    ((k, ag),) = ops_of(program, "c_allgather_owned")
    pieces = [s.name(p.name) for p, _ in pairs for s in shards[p.name]]
    assert ag.input("X") == ag.output("Out") == pieces
    assert ag.attr("owners") == rs.attr("owners")
    last_update = max(j for j, op in enumerate(block.ops) if op.role is OpRole.OPTIMIZE
                      and op.type != "concat")
    assert k == last_update + 1
    chunked = [p.name for p, _ in pairs if shards[p.name][0].rows is not None]
    assert [(op.type, op.output("Out")) for op in block.ops[k + 1:k + 1 + len(chunked)]] == [
        ("concat", [name]) for name in chunked]
    check_waits(block)


def test_fused_reduce_mode_buckets_overlap_the_backward_pass():
    main, _, loss = build(opt="adam")
    n, bucket_bytes = 3, 1000
    program, layout = data_parallel(main, loss, n=n, bucket_mb=bucket_bytes / MB, reduce=True,
                                    fuse=True)
    block = program.global_block()
    pairs = trained_params_grads(main)
    groups = buckets(pairs, main.global_block(), bucket_bytes)
    scatters = ops_of(program, "c_reduce_scatter_owned")
    assert len(groups) > 1 and [op.input("X") for _, op in scatters] == groups
    sync = min(i for i, _ in ops_of(program, "c_sync_comm_stream"))
    for (i, op), group in zip(scatters, groups):
        # right after its bucket's last gradient; async, but the last, and waited for
        assert_right_after(block, i, max(last_compute_writer(block, g) for g in group))
        assert op.output("Out") == [s.name(g) for p, g in pairs if g in group
                                    for s in layout.shards[p.name]]
        assert op.attr("use_calc_stream") == (op is scatters[-1][1])
        assert i < sync
    check_waits(block)


def test_fused_reduce_mode_falls_back_when_a_gradient_is_read_early():
    main, _, loss = build(opt="sgd")
    pairs = trained_params_grads(main)
    block = main.global_block()
    first = pairs[0][1]  # finished first: a read before the last gradient is done
    probe = block.create_var(name="probe", shape=block.vars[first].shape, dtype="float32")
    op = block.append_op("scale", {"X": [first]}, {"Out": [probe]}, {"scale": 2.0},
                         role=OpRole.BACKWARD)
    block.ops.pop()
    block.ops.insert(last_writer(block)[pairs[-1][1]], op)
    # one reduce-scatter at the end would let it read the unreduced value; reduced right
    # after its last write instead, the read is caught as reading an unfinished collective
    with pytest.raises(AssertionError, match=r"'scale' reads \['fc_2.b_0@GRAD'\] before the "
                                             r"collective writing it is waited for"):
        data_parallel(main, loss, n=2, reduce=True, fuse=True)


def test_reduce_mode_rejects_an_op_mixing_parameters():
    main, _, loss = build(opt="sgd")
    block = main.global_block()
    w, b = main.grad_var_map["fc_1.w_0"], main.grad_var_map["fc_1.b_0"]
    first_update = next(i for i, op in enumerate(block.ops) if op.type == "sgd")
    with main.role_guard(OpRole.OPTIMIZE):
        block.create_var(name="mixed_grads", shape=block.vars[w].shape, dtype="float64")
        block._insert_op(first_update, "elementwise_add", {"X": [w], "Y": [b]},
                         {"Out": ["mixed_grads"]})
    assert block.ops[first_update].role is OpRole.OPTIMIZE
    with pytest.raises(InvalidArgumentError,
                       match=r"op #\d+ 'elementwise_add'.*\['fc_1.b_0', 'fc_1.w_0'\]"
                             r".*ReduceStrategy.AllReduce"):
        data_parallel(main, loss, n=2, reduce=True)
    program, _ = data_parallel(main, loss, n=2)  # AllReduce mode takes it
    assert ops_of(program, "elementwise_add")


def test_apply_reduce_mode_directly_returns_the_layout():
    main, _, _ = build(opt="momentum")
    program = main.clone()
    pairs = trained_params_grads(program)
    params = [p for p, _ in pairs]
    layout = apply_reduce_mode(program, pairs, 2, fuse_broadcast=False)
    assert isinstance(layout, StateSharding)
    assert layout.shards == plan_shards(params, 2)
    whole = {name: s[0].owner for name, s in layout.shards.items() if s[0].rows is None}
    assert assign_owners(params, 2) == whole and len(whole) < len(pairs)
    items = sum(len(s) for s in layout.shards.values())
    assert len(ops_of(program, "c_reduce_sum")) == len(ops_of(program, "c_broadcast")) == items
    assert len(ops_of(program, "concat")) == len(pairs) - len(whole)
    assert set(layout.state_owner) == {s for names in program.optimizer_state.values()
                                       for s in names}
    assert set(layout.state_source) < set(layout.state_owner)
    # the source program is left as it was
    assert not ops_of(main, "c_reduce_sum")
    assert all("@SHARD" not in s for names in main.optimizer_state.values() for s in names)


def test_not_reduce_mode_has_no_layout():
    main, _, loss = build(opt="adam")
    assert data_parallel(main, loss, n=2)[1] is None
    assert data_parallel(main, loss, n=1, reduce=True)[1] is None
    assert data_parallel(main, loss, n=2, reduce=True)[1] is not None


# -- check_waits -------------------------------------------------------------------------------
def _waits_block(*steps):
    """A block of hand-made ops over 4-vectors g, h, out: ("async"|"inline", type, names) for a
    collective, ("sync",) for a c_sync_comm_stream, ("read", name) for a compute op."""
    program = fluid.Program()
    block = program.global_block()
    for name in ("g", "h", "out"):
        block.create_var(name=name, shape=(4,), dtype="float64")
    for step in steps:
        if step[0] == "sync":
            block.append_op("c_sync_comm_stream", {"X": ["g", "h"]}, {"Out": ["g", "h"]}, {},
                            role=OpRole.COMMUNICATE)
        elif step[0] == "read":
            block.append_op("scale", {"X": [step[1]]}, {"Out": ["out"]}, {"scale": 2.0},
                            role=OpRole.OPTIMIZE)
        else:
            kind, type_, names = step
            block.append_op(type_, {"X": names}, {"Out": names},
                            {"use_calc_stream": kind == "inline"}, role=OpRole.COMMUNICATE)
    return block


@pytest.mark.parametrize("collective", ["c_allreduce_sum", "c_reduce_sum", "c_broadcast"])
def test_check_waits_rejects_a_read_before_the_wait(collective):
    block = _waits_block(("async", collective, ["g"]), ("read", "g"))
    with pytest.raises(AssertionError, match=r"op #1 'scale' reads \['g'\] before"):
        check_waits(block)
    # the wait, a collective run inline, or reading something else are all fine
    check_waits(_waits_block(("async", collective, ["g"]), ("sync",), ("read", "g")))
    check_waits(_waits_block(("inline", collective, ["g"]), ("read", "g")))
    check_waits(_waits_block(("async", collective, ["g"]), ("read", "h"), ("sync",),
                             ("read", "g")))
    # in flight again after a wait: only the next wait covers it
    block = _waits_block(("async", collective, ["g", "h"]), ("sync",), ("read", "h"),
                         ("async", collective, ["h"]), ("read", "g"), ("read", "h"))
    with pytest.raises(AssertionError, match=r"op #5 'scale' reads \['h'\]"):
        check_waits(block)


def test_check_waits_catches_a_missing_wait_in_a_real_program():
    main, _, loss = build()
    program, _ = data_parallel(main, loss, n=2)
    block = program.global_block()
    check_waits(block)
    block.ops = [op for op in block.ops if op.type != "c_sync_comm_stream"]
    with pytest.raises(AssertionError, match=r"'[a-z_]+' reads \['fc_.*@GRAD'\]"):
        check_waits(block)


# -- startup broadcast -------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", [False, True])
def test_broadcast_program_one_per_persistable_read_and_the_whole_state(reduce):
    main, _, loss = build(opt="adam", frozen=True)
    whole_state = {n for names in main.optimizer_state.values() for n in names}
    program, _ = data_parallel(main, loss, n=2, reduce=reduce)
    bcast = broadcast_program(program, whole_state)
    block = program.global_block()
    state = {n for names in program.optimizer_state.values() for n in names}
    assert whole_state and (state != whole_state) == reduce  # Reduce mode splits some state
    read = {n for op in block.ops for n in op.input_arg_names}
    want = sorted(n for n, v in block.vars.items() if v.persistable
                  and (n in read or n in whole_state) and n not in state - whole_state)
    assert "frozen_w" in want and "learning_rate_0" in want and whole_state <= set(want)
    assert {p.name for p in main.all_parameters()} <= set(want)
    ops = bcast.global_block().ops
    assert [op.input("X") for op in ops] == [[n] for n in want]
    for op in ops:
        assert op.type == "c_broadcast"
        assert op.attr("root") == 0
        assert op.output("Out") == op.input("X")
        assert op.role is OpRole.COMMUNICATE
        var = bcast.global_block().vars[op.input("X")[0]]
        src = block.vars[var.name]
        assert var.persistable and var.shape == src.shape and var.dtype == src.dtype
    # the chunks of split state do not exist yet when it runs
    assert not (state - whole_state) & {n for op in ops for n in op.input_arg_names}


# -- fingerprints and serialization ------------------------------------------------------------
@pytest.mark.parametrize("reduce", [False, True])
def test_identical_builds_have_equal_fingerprints(reduce):
    prints = []
    for _ in range(2):
        main, _, loss = build(opt="adam", clip=True)
        prints.append(data_parallel(main, loss, n=3, reduce=reduce)[0].fingerprint())
    assert prints[0] == prints[1]


def test_owners_and_collectives_are_part_of_the_fingerprint():
    def dp(n, reduce):
        main, _, loss = build(opt="adam")
        return data_parallel(main, loss, n=n, reduce=reduce, scale=GradientScaleStrategy.One)[0]

    # with the seed fixed at 1, AllReduce's program does not depend on the number of ranks ...
    assert dp(2, False).fingerprint() == dp(3, False).fingerprint()
    # ... Reduce mode's does: the owners, and with them the roots, change
    assert dp(2, True).fingerprint() != dp(3, True).fingerprint()

    program = dp(2, True)
    before = program.fingerprint()
    update = next(op for op in program.global_block().ops if op.type == "adam")
    update.owner = 1 - update.owner
    assert program.fingerprint() != before
    update.owner = 1 - update.owner
    assert program.fingerprint() == before
    program.global_block().ops = [op for op in program.global_block().ops
                                  if op.type != "c_broadcast"]
    assert program.fingerprint() != before
    assert dp(2, False).fingerprint() != dp(2, True).fingerprint()


def test_serialization_keeps_owners():
    main, _, loss = build(opt="adam", clip=True)
    program, _ = data_parallel(main, loss, n=2, reduce=True)
    owners = [op.owner for op in program.global_block().ops]
    assert {o for o in owners if o is not None} == {0, 1} and None in owners
    for copy in (fluid.Program.from_json(program.to_json()),
                 fluid.Program.parse_from_string(program.serialize_to_string()),
                 program.clone()):
        assert [op.owner for op in copy.global_block().ops] == owners
        assert [op.type for op in copy.global_block().ops] == [
            op.type for op in program.global_block().ops]
        assert copy.fingerprint() == program.fingerprint()
    assert "@rank 1" in str(program)
