"""fluid.layers.py_reader's queue (fluid's LoDTensorBlockingQueue), against fluid 1.8.5
(tests/oracle/make_loader_feed.py): the program pushes its batches itself, the runs take
them in order without start(), close() ends the epoch with EOFException, a push after close
is refused; pushed from another thread, it blocks at capacity; start() after reset() opens
the next epoch; a decorated source still works beside it, its thread joinable."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.reader.feed_queue import FeedQueue
from tests.oracle_io import load

ORACLE = load("loader_feed")["py_reader_queue"]


def _net(capacity=2):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        reader = fluid.layers.py_reader(capacity=capacity, shapes=[(-1, 2), (-1, 1)],
                                        dtypes=["float32", "int64"])
        queue = reader.queue
        x, y = fluid.layers.read_file(reader)
        out = fluid.layers.scale(x, 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, reader, queue, out, y


def _batch(i):
    batch = fluid.LoDTensorArray()
    for value in (np.full((i + 1, 2), i, "float32"), np.full((i + 1, 1), i, "int64")):
        t = fluid.LoDTensor()
        t.set(value, fluid.CPUPlace())
        batch.append(t)
    return batch


def test_pushed_batches_are_read_in_order_until_close_as_in_fluid():
    main, exe, _, queue, out, y = _net()
    assert queue.capacity() == ORACLE["capacity"]
    for i, want in enumerate(ORACLE["fetched"]):
        queue.push(_batch(i))
        got = exe.run(main, fetch_list=[out, y])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype
    queue.close()
    assert ORACLE["end"] == "EOFException"
    with pytest.raises(fluid.core.EOFException):
        exe.run(main, fetch_list=[out])
    assert queue.push(fluid.LoDTensorArray()) is ORACLE["push_after_close"]


def test_a_feeding_thread_blocks_at_capacity_and_the_next_epoch_starts_after_reset():
    main, exe, reader, queue, out, _ = _net(capacity=2)

    def feed(n):
        for i in range(n):
            queue.push(_batch(i))
        queue.close()

    for _epoch in range(2):
        thread = threading.Thread(target=feed, args=(5,), daemon=True)
        thread.start()
        seen = []
        try:
            while True:
                seen.append(exe.run(main, fetch_list=[out])[0].shape[0])
        except fluid.core.EOFException:
            pass
        thread.join(timeout=60)
        assert seen == [1, 2, 3, 4, 5] and queue.size() == 0
        reader.reset()
        reader.start()  # the queue opens again for the next epoch's pushes
        assert not queue.is_closed()


def test_a_decorated_source_beside_the_queue_reads_in_its_thread():
    main, exe, reader, queue, out, _ = _net()

    def batches():
        for i in range(3):
            yield [np.full((2, 2), i, "float32"), np.full((2, 1), i, "int64")]

    reader.decorate_batch_generator(batches)
    reader.start()
    got = []
    try:
        while True:
            got.append(float(exe.run(main, fetch_list=[out])[0][0, 0]))
    except fluid.core.EOFException:
        reader.reset()
    assert got == [0.0, 2.0, 4.0]
    reader.exited = True
    reader.thread.join(timeout=60)
    assert not reader.thread.is_alive()


def test_the_queue_refuses_what_is_not_a_batch_and_kill_drops_what_is_queued():
    q = FeedQueue(3)
    with pytest.raises(ValueError, match="expected one batch"):
        q.push(np.ones(2))
    q.push([np.ones(1)])
    q.kill()
    assert q.size() == 0 and q.is_closed() and q.push([np.ones(1)]) is False
