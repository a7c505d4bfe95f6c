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
