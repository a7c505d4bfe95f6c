"""A data-parallel step fed fewer batches than places (a DataLoader's short last batch): the
fetch layout stays the same whatever the number of places that ran, bad feeds are FeedErrors,
and a program that must run on every place says why."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError


def _compiled(with_collective=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        fluid.data("y", [-1, 1], "float32")  # fed, unread: a second input to deal out
        pred = fluid.layers.fc(x, 2)
        if with_collective:  # an evaluation that sums a metric over the places
            pred = fluid.layers.collective._c_allreduce(pred, reduce_type="sum",
                                                        use_calc_stream=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(places=fluid.cpu_places(2))

    def run(feed, **kw):
        return exe.run(compiled, feed=feed, fetch_list=[pred], scope=scope, **kw)
    return run


def test_unmerged_fetches_keep_one_value_per_place_that_ran():
    run = _compiled()
    full = run({"x": np.ones((4, 2), "float32"), "y": np.ones((4, 1), "float32")},
               return_numpy=False, return_merged=False)
    short = run({"x": np.ones((1, 2), "float32"), "y": np.ones((1, 1), "float32")},
                return_numpy=False, return_merged=False)
    assert [np.array(v).shape for v in full[0]] == [(2, 2), (2, 2)]  # LoDTensors, as fluid
    assert [np.array(v).shape for v in short[0]] == [(1, 2)]  # a list of one, not the array


def test_a_ragged_short_feed_is_a_feed_error():
    run = _compiled()
    with pytest.raises(FeedError, match="feed 'x': cannot convert"):
        run({"x": [[1.0, 2.0], [1.0]], "y": np.ones((2, 1), "float32")})


def test_short_feeds_of_different_sizes_are_refused():
    run = _compiled()
    with pytest.raises(FeedError, match=r"different batch sizes \{'x': 4, 'y': 1\}"):
        run({"x": np.ones((4, 2), "float32"), "y": np.ones((1, 1), "float32")})


def test_a_program_with_collectives_says_it_needs_every_place():
    run = _compiled(with_collective=True)
    with pytest.raises(FeedError, match="this program has collectives, which every place "
                                        "must join"):
        run([{"x": np.ones((1, 2), "float32"), "y": np.ones((1, 1), "float32")}])
