"""The data-parallel passes, each checked by the structure of the program it produces: the
loss-gradient seed, all-reduce placement and buckets, inline collectives, Reduce mode's owners
and collectives, the startup broadcast, fingerprints and serialization of owners."""
from __future__ import annotations

import re

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.operator import OpRole
from spmd.errors import FeedError, InvalidArgumentError
from spmd.passes.allreduce import insert_allreduce
from spmd.passes.broadcast_params import broadcast_program
from spmd.passes.common import last_writer, mark_inline_collectives, trained_params_grads
from spmd.passes.data_parallel import build_data_parallel
from spmd.passes.reduce_mode import apply_reduce_mode, assign_owners
from spmd.passes.scale_loss_grad import scale_loss_grad
from spmd.passes.strategy import BuildStrategy, GradientScaleStrategy, ReduceStrategy

COLLECTIVES = ("c_allreduce_sum", "c_reduce_sum", "c_broadcast")
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
             scale: GradientScaleStrategy = GradientScaleStrategy.CoeffNumDevice):
    bs = BuildStrategy()
    bs.reduce_strategy = ReduceStrategy.Reduce if reduce else ReduceStrategy.AllReduce
    bs.fuse_all_reduce_ops = fuse
    bs.fuse_broadcast_ops = fuse
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
    program, owners = data_parallel(main, loss, n=2)
    assert owners == {}
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


# -- Reduce mode -------------------------------------------------------------------------------
def _params(sizes: dict[str, int]):
    program = fluid.Program()
    block = program.global_block()
    return [block.create_parameter(name, (n,), "float64") for name, n in sizes.items()]


def test_assign_owners_greedy_by_bytes():
    params = _params({"small": 10, "big": 100, "mid_a": 50, "mid_b": 60, "quarter": 40})
    # big 100 -> 0; mid_b 60 -> 1; mid_a 50 -> 1 (60 < 100); quarter 40 -> 0 (100 < 110);
    # small 10 -> 1 (110 < 140)
    assert assign_owners(params, 2) == {"big": 0, "mid_b": 1, "mid_a": 1, "quarter": 0,
                                        "small": 1}
    assert assign_owners(list(reversed(params)), 2) == assign_owners(params, 2)


def test_assign_owners_ties_by_name_then_lowest_rank():
    params = _params({"b": 8, "a": 8, "d": 8, "c": 8})
    assert assign_owners(params, 3) == {"a": 0, "b": 1, "c": 2, "d": 0}
    assert assign_owners(params, 1) == {"a": 0, "b": 0, "c": 0, "d": 0}


def test_owners_are_deterministic_and_the_largest_goes_to_rank_0():
    owners = []
    for _ in range(2):
        main, _, loss = build(opt="adam", hidden=(32, 16))
        owners.append(data_parallel(main, loss, n=3, reduce=True)[1])
    assert owners[0] == owners[1]
    largest = max(main.all_parameters(), key=lambda p: (nbytes(p), p.name))
    assert owners[0][largest.name] == 0
    assert set(owners[0]) == {p.name for p, _ in trained_params_grads(main)}
    assert set(owners[0].values()) == {0, 1, 2}


@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam"])
def test_reduce_mode_graph(opt):
    main, _, loss = build(opt=opt, clip=True, decay=True)
    program, owners = data_parallel(main, loss, n=2, reduce=True)
    block = program.global_block()
    pairs = trained_params_grads(main)
    grad_owner = {g: owners[p.name] for p, g in pairs}
    assert len(ops_of(program, "c_allreduce_sum")) == 1  # the global norm's, below

    reduces = ops_of(program, "c_reduce_sum")
    assert [op.input("X") for _, op in reduces] == [[g] for _, g in pairs]
    for i, op in reduces:
        (g,) = op.input("X")
        assert op.attr("root_id") == grad_owner[g]
        assert op.role is OpRole.COMMUNICATE
        assert_right_after(block, i, last_compute_writer(block, g))
    (sync_index, sync), = [(i, op) for i, op in ops_of(program, "c_sync_comm_stream")
                           if len(op.input("X")) == len(pairs)]
    assert sync.input("X") == [g for _, g in pairs]
    assert block.ops[sync_index + 1].role is OpRole.OPTIMIZE
    assert all(i < sync_index for i, _ in reduces)

    # every update op, and the clip / regularization ops of one parameter, run on its owner
    updates = [op for op in block.ops if op.type in UPDATE_OPS]
    assert len(updates) == len(pairs)
    for op in updates:
        assert op.owner == owners[op.input("Param")[0]]
    for p, g in pairs:
        per_param = [op for op in block.ops if op.role is OpRole.OPTIMIZE
                     and (g in op.input_arg_names or f"{p.name}_" in " ".join(op.output_arg_names))]
        kinds = {op.type for op in per_param}
        assert {"squared_l2_norm", "elementwise_mul", "scale", "sum"} <= kinds, kinds
        assert all(op.owner == owners[p.name] for op in per_param), [str(o) for o in per_param]
    for state in main.optimizer_state.values():
        for name in state:
            writers = [op for op in block.ops if name in op.output_arg_names]
            assert writers and all(op.owner is not None for op in writers)

    # the global norm: a sum with no owner, completed by an allreduce and its wait
    (k, norm_sum), = [(i, op) for i, op in ops_of(program, "sum")
                      if len(op.input("X")) == len(pairs)]
    assert norm_sum.owner is None
    out = norm_sum.output("Out")
    assert block.ops[k + 1].type == "c_allreduce_sum" and block.ops[k + 1].input("X") == out
    assert block.ops[k + 2].type == "c_sync_comm_stream" and block.ops[k + 2].input("X") == out
    assert block.ops[k + 3].type == "sqrt" and block.ops[k + 3].owner is None

    # each parameter is broadcast from its owner, after everything else
    bcasts = ops_of(program, "c_broadcast")
    assert [op.input("X") for _, op in bcasts] == [[p.name] for p, _ in pairs]
    for _, op in bcasts:
        assert op.attr("root") == owners[op.input("X")[0]]
    assert [i for i, _ in bcasts] == list(range(len(block.ops) - len(bcasts), len(block.ops)))


def test_reduce_mode_fused_broadcast_one_per_owner():
    main, _, loss = build(opt="adam")
    program, owners = data_parallel(main, loss, n=3, reduce=True, fuse=True)
    params = [p.name for p, _ in trained_params_grads(main)]
    bcasts = [op for _, op in ops_of(program, "c_broadcast")]
    assert [op.attr("root") for op in bcasts] == sorted(set(owners.values()))
    for op in bcasts:
        assert op.input("X") == [n for n in params if owners[n] == op.attr("root")]
    assert program.global_block().ops[-len(bcasts):] == bcasts


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


def test_apply_reduce_mode_directly_returns_owners():
    main, _, _ = build(opt="momentum")
    program = main.clone()
    pairs = trained_params_grads(program)
    owners = apply_reduce_mode(program, pairs, 2, fuse_broadcast=False)
    assert owners == assign_owners([p for p, _ in pairs], 2)
    assert len(ops_of(program, "c_reduce_sum")) == len(pairs)


# -- startup broadcast -------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", [False, True])
def test_broadcast_program_one_per_persistable_read(reduce):
    main, _, loss = build(opt="adam", frozen=True)
    program, _ = data_parallel(main, loss, n=2, reduce=reduce)
    bcast = broadcast_program(program)
    block = program.global_block()
    state = {n for names in program.optimizer_state.values() for n in names}
    assert state  # adam has moments and beta powers
    read = {n for op in block.ops for n in op.input_arg_names}
    want = sorted(n for n, v in block.vars.items() if v.persistable and n in read
                  and n not in state)
    assert "frozen_w" in want and "learning_rate_0" in want
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
    assert not state & {n for op in ops for n in op.input_arg_names}


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
