"""A failed run leaves a data-parallel program usable: a feed error is raised before any
collective starts, the parameters stay as they were, and the next good run works. Every rank
feeds a bad batch once, or only the last rank does (the others then wait in the step's first
collective, which the last rank's corrected run joins). Either way the parameters end equal to
one process trained on the whole batches, without the bad one."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, params, shard

import spmd.fluid as fluid
from spmd.comm.topology import detect
from spmd.errors import FeedError

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 3


def _single_process_reference(size: int):
    """One process on the rows the ranks' shards hold together."""
    main, startup, loss = build("mlp", "sgd", "float64")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for x, y in batches("float64", STEPS):
        rows = len(x) // size * size
        exe.run(main, feed={"x": x[:rows], "y": y[:rows]}, fetch_list=[loss], scope=scope)
    return params(scope, main)


@pytest.mark.parametrize("who", ["every-rank", "last-rank"])
@pytest.mark.parametrize("bad", ["dtype", "empty", "missing"])
def test_a_bad_feed_then_training_goes_on(who, bad):
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float64")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    feeds_bad = who == "every-rank" or t.rank == t.size - 1
    for step, (x, y) in enumerate(batches("float64", STEPS)):
        feed = {"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)}
        if step == 1 and feeds_bad:
            wrong = {"dtype": {**feed, "x": feed["x"].astype("float32")},
                     "empty": {"x": feed["x"][:0], "y": feed["y"][:0]},
                     "missing": {"x": feed["x"]}}[bad]
            before = params(scope, main)
            with pytest.raises(FeedError, match=f"\\[rank {t.rank}/{t.size}\\]"):
                exe.run(compiled, feed=wrong, fetch_list=[loss], scope=scope)
            for name, value in params(scope, main).items():
                np.testing.assert_array_equal(value, before[name])
        exe.run(compiled, feed=feed, fetch_list=[loss], scope=scope)
    want = _single_process_reference(t.size)
    for name, value in params(scope, main).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-10, atol=1e-12, err_msg=name)
