"""fluid.io.default_collate_fn against Paddle 1.8.5: one stacked array per field."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("reader")["collate"]

BATCHES = {
    "tuples_of_arrays": [(np.array([1.0, 2.0]), np.array([3])),
                         (np.array([4.0, 5.0]), np.array([6]))],
    "ndarrays": [np.array([1, 2]), np.array([3, 4])],
    "tuples_of_numbers": [(1, 2.5), (3, 4.5)],
    "lists": [[1, 2], [3, 4]],
    "zero_d_arrays": [np.array(1), np.array(2)],
    "float32_images": [(np.ones((2, 2), "float32"), 1), (np.zeros((2, 2), "float32"), 0)],
    "ndarray_then_tuple": [np.array([1, 2]), (3, 4)],
}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_matches_fluid(name):
    got = fluid.io.default_collate_fn(BATCHES[name])
    want = ORACLE[name]
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_fluid_reader_holds_it_too():
    assert fluid.reader.default_collate_fn is fluid.io.default_collate_fn


@pytest.mark.parametrize("batch,oracle,message", [
    ([(np.array([1.0, 2.0]),), (np.array([4.0]),)], "ragged",
     r"field 0: sample 1 has shape \[1\], sample 0 has \[2\]"),
    ([1, 2], "ints", r"sample 0 is of type int, not a sequence of fields"),
    ([], "empty", "the batch is empty"),
])
def test_errors_explain(batch, oracle, message):
    assert ORACLE[oracle] in ("ValueError", "TypeError", "IndexError")  # fluid fails too
    with pytest.raises(ValueError, match=message):
        fluid.io.default_collate_fn(batch)


def test_samples_with_different_field_counts_are_refused():
    # fluid pairs such fields up by position, shifting them silently; spmd says so instead
    with pytest.raises(ValueError, match=r"sample 1 has 1 field\(s\), sample 0 has 2"):
        fluid.io.default_collate_fn([(1, 2), (3,)])


def test_feeds_a_batch_generator():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=2)
    samples = [(np.full(2, i, "float32"), np.array([i])) for i in range(4)]

    def batches():
        for i in range(0, 4, 2):
            yield fluid.io.default_collate_fn(samples[i:i + 2])

    loader.set_batch_generator(batches, places=fluid.CPUPlace())
    steps = list(loader())
    assert [np.array(s[0]["y"]).ravel().tolist() for s in steps] == [[0, 1], [2, 3]]
