"""paddle.batch and the paddle.reader decorators, against Paddle 1.8.5's outputs."""
from __future__ import annotations

import random

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("reader")["decorators"]
r = paddle.reader


def samples():
    for i in range(7):
        yield (i, [i, i + 1])


def ten():
    return iter(range(10))


def as_lists(items):
    """JSON stored tuples as lists: compare structure that way."""
    if isinstance(items, (list, tuple)):
        return [as_lists(i) for i in items]
    return items


@pytest.mark.parametrize("name,make", [
    ("batch", lambda: paddle.batch(samples, 3)),
    ("batch_drop", lambda: paddle.batch(samples, 3, drop_last=True)),
    ("batch_drop_none", lambda: paddle.batch(samples, 3, drop_last=None)),
    ("batch_drop_zero", lambda: paddle.batch(samples, 3, drop_last=0)),
    ("io_batch", lambda: fluid.io.batch(ten, 4)),
    ("compose", lambda: r.compose(ten, samples, check_alignment=False)),
    ("chain", lambda: r.chain(samples, ten)),
    ("map", lambda: r.map_readers(lambda a, b: a * b[1], ten, samples)),
    ("firstn", lambda: r.firstn(ten, 3)),
    ("firstn_negative", lambda: r.firstn(ten, -1)),
    ("xmap_order", lambda: r.xmap_readers(lambda x: x * 3, ten, 3, 2, order=True)),
    ("cache", lambda: r.cache(samples)),
    ("buffered", lambda: r.buffered(ten, 2)),
])
def test_matches_fluid(name, make):
    assert as_lists(list(make()())) == ORACLE[name]


def test_shuffle_uses_python_random_as_fluid():
    random.seed(5)
    assert list(fluid.io.shuffle(ten, 4)()) == ORACLE["shuffle_seed5"]


def test_compose_keeps_tuples_and_checks_alignment():
    assert list(r.compose(lambda: [1], lambda: [(2, 3)])()) == [(1, 2, 3)]
    with pytest.raises(r.ComposeNotAligned, match="not aligned"):
        list(r.compose(ten, samples)())


def test_batch_rejects_bad_size():
    with pytest.raises(ValueError, match="batch_size"):
        paddle.batch(samples, 0)


def test_xmap_unordered_gives_every_result():
    out = list(r.xmap_readers(lambda x: x + 1, ten, 4, 3)())
    assert sorted(out) == list(range(1, 11))


def test_exceptions_reach_the_consumer_with_traceback():
    def bad():
        yield 1
        raise KeyError("broken sample")

    for decorated in (r.buffered(bad, 2), r.xmap_readers(lambda x: x, bad, 2, 2)):
        with pytest.raises(KeyError, match="broken sample") as info:
            list(decorated())
        assert any(entry.name == "bad" for entry in info.traceback)

    def bad_mapper(x):
        raise ZeroDivisionError("mapper failed")

    with pytest.raises(ZeroDivisionError, match="mapper failed"):
        list(r.xmap_readers(bad_mapper, ten, 2, 2, order=True)())


@pytest.mark.parametrize("use_pipe", [True, False])
def test_multiprocess_reader_keeps_types(use_pipe):
    def part(k):
        def read():
            for i in range(3):
                yield (np.full((2,), k * 10 + i, "float32"), k, np.int64(i), "s")
        return read

    out = list(r.multiprocess_reader([part(0), part(1)], use_pipe=use_pipe, queue_size=2)())
    assert len(out) == 6
    keys = sorted((int(s[0][0]), s[1], int(s[2])) for s in out)
    assert keys == [(k * 10 + i, k, i) for k in (0, 1) for i in range(3)]
    first = out[0]
    assert isinstance(first, tuple) and first[0].dtype == np.float32 and first[3] == "s"
    assert isinstance(first[2], np.int64)
    if use_pipe:  # round robin over the readers, as fluid's pipe mode
        assert [s[1] for s in out] == [0, 1, 0, 1, 0, 1]


def test_multiprocess_reader_child_error_names_it():
    def bad():
        yield [1]
        raise RuntimeError("child broke")

    with pytest.raises(ValueError, match="child broke"):
        list(r.multiprocess_reader([bad])())


def test_fluid_io_holds_the_reader_decorators_as_in_fluid_1_8():
    import spmd.fluid as fluid_face
    from spmd import reader as spmd_reader

    for name in ("cache", "map_readers", "buffered", "compose", "chain", "ComposeNotAligned",
                 "firstn", "xmap_readers", "multiprocess_reader", "shuffle", "batch"):
        assert getattr(fluid_face.io, name) is getattr(spmd_reader, name), name
