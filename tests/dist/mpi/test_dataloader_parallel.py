"""DataLoader under mpiexec: each rank's loader reads its own shard of every global batch
(iterable, and non-iterable through the run hook); N ranks end with the parameters of one
process fed the whole batches."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 4


def reference(data):
    main, startup, loss = build("mlp", "momentum", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return params(scope, main)


@pytest.mark.parametrize("iterable", [True, False])
def test_loader_shards_equal_one_process(iterable):
    t = detect()
    data = batches("float64", STEPS)
    want = reference(data)
    main, startup, loss = build("mlp", "momentum", "float64")
    block = main.global_block()
    with fluid.program_guard(main, startup):
        loader = fluid.io.DataLoader.from_generator(
            feed_list=[block.var("x"), block.var("y")], capacity=2, iterable=iterable)

    def my_shard():  # this rank's rows of every global batch, one sample at a time
        for x, y in data:
            yield from zip(shard(x, t.rank, t.size), shard(y, t.rank, t.size))

    per_rank = len(data[0][0]) // t.size
    loader.set_sample_generator(my_shard, batch_size=per_rank,
                                places=fluid.CPUPlace() if iterable else None)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()])
    steps = 0
    if iterable:
        for feed in loader():
            exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
            steps += 1
    else:
        loader.start()
        try:
            while True:
                exe.run(compiled, fetch_list=[loss], scope=scope)
                steps += 1
        except fluid.core.EOFException:
            loader.reset()
    assert steps == STEPS
    got = params(scope, main)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10,
                                   atol=1e-10 * float(np.abs(value).max()), err_msg=name)


def _short_last_step(iterable):
    """dp_models' MLP reading a drop_last=False DataLoader over two places, given three
    batches of 4 rows per rank: (main, startup, loss, loader, the batches, the places)."""
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float64")
    block = main.global_block()
    with fluid.program_guard(main, startup):
        loader = fluid.io.DataLoader.from_generator(
            feed_list=[block.var("x"), block.var("y")], capacity=2, iterable=iterable,
            drop_last=False)
    mine = [(x[:4] + t.rank, y[:4]) for x, y in batches("float64", 3)]
    places = [fluid.CPUPlace()] * 2
    loader.set_batch_generator(lambda: iter(mine), places=places if iterable else None)
    return main, startup, loss, loader, mine, places


@pytest.mark.parametrize("iterable", [True, False])
def test_drop_last_false_runs_a_test_program_on_the_fed_places(iterable):
    """Two places per rank, three batches per rank: the second step feeds place 0 only, as
    fluid 1.8 does for a program without a backward pass; its loss is that batch's loss."""
    main, startup, loss, loader, mine, places = _short_last_step(iterable)
    test = main.clone(for_test=True)  # after the loader: the clone reads from it too
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(test).with_data_parallel(loss_name=loss.name,
                                                              places=places)
    got = []
    if iterable:
        for feed in loader():
            got.append(exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)[0])
    else:
        loader.start()
        with pytest.raises(fluid.core.EOFException):
            while True:
                got.append(exe.run(compiled, fetch_list=[loss], scope=scope)[0])
        loader.reset()
    # the reference: the same model without a loader, one plain run per batch
    plain, _, plain_loss = build("mlp", "sgd", "float64")
    plain = plain.clone(for_test=True)
    want = [exe.run(plain, feed={"x": x, "y": y}, fetch_list=[plain_loss], scope=scope)[0]
            for x, y in mine]
    assert [g.shape for g in got] == [(2,), (1,)]
    np.testing.assert_allclose(np.concatenate(got), np.concatenate(want), rtol=1e-12)


@pytest.mark.parametrize("iterable", [True, False])
def test_drop_last_false_training_stops_before_the_short_step(iterable):
    """A training program runs on every place: with three batches per rank for two places,
    fluid 1.8 refuses the short last list (iterable) or ends the epoch before it (start())."""
    main, startup, loss, loader, mine, places = _short_last_step(iterable)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              places=places)
    steps = 0
    if iterable:
        data = list(loader())
        assert [len(d) for d in data] == [2, 1]
        exe.run(compiled, feed=data[0], fetch_list=[loss], scope=scope)
        steps += 1
        with pytest.raises(ValueError, match="drop_last=True"):
            exe.run(compiled, feed=data[1], fetch_list=[loss], scope=scope)
    else:
        loader.start()
        with pytest.raises(fluid.core.EOFException, match="dropped"):
            while True:
                exe.run(compiled, fetch_list=[loss], scope=scope)
                steps += 1
        loader.reset()
    assert steps == 1
