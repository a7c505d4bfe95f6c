"""fluid.DataFeeder: dense, nested and scalar samples, against Paddle 1.8.5's feed outputs."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("reader")["feeder"]


@pytest.fixture
def feeder():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        img = fluid.layers.data(name="img", shape=[1, 2, 2])
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        vec = fluid.data(name="vec", shape=[None, 3], dtype="float64")
        return fluid.DataFeeder(feed_list=[img, label, vec], place=fluid.CPUPlace())


BATCH = [(np.arange(4) + i, i, [[i, 2 * i, 3 * i]]) for i in range(3)]


def check_same(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype, name
        np.testing.assert_array_equal(got[name], array)


def test_feed_matches_fluid(feeder):
    check_same(feeder.feed(BATCH), ORACLE["feed"])


def test_nested_lists_match_fluid(feeder):
    check_same(feeder.feed([([[1, 2], [3, 4]], [5], [1.5, 2.5, 3.5])]), ORACLE["feed_nested"])


def test_feed_parallel_matches_fluid(feeder):
    parts = list(feeder.feed_parallel([BATCH[:1], BATCH[1:]], 2))
    assert len(parts) == 2
    for got, want in zip(parts, ORACLE["feed_parallel"]):
        check_same(got, want)


def test_attributes_match_fluid(feeder):
    want = ORACLE["attributes"]
    assert feeder.feed_names == want["feed_names"]
    assert [list(s) for s in feeder.feed_shapes] == want["feed_shapes"]
    assert [type(s).__name__ for s in feeder.feed_shapes] == want["feed_shape_types"]
    assert feeder.feed_lod_level == want["feed_lod_level"]
    assert feeder.feed_dtypes == ["float32", "int64", "float64"]


def test_names_in_feed_list_use_the_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        fluid.layers.data(name="a", shape=[2])
    out = fluid.DataFeeder(["a"], fluid.CPUPlace(), program=main).feed([([1, 2],)])
    assert out["a"].shape == (1, 2)


def test_decorate_reader(feeder):
    def minibatches():
        for _ in range(5):
            yield BATCH

    single = list(feeder.decorate_reader(minibatches, multi_devices=False)())
    assert len(single) == 5 and single[0]["img"].shape == (3, 1, 2, 2)
    multi = list(feeder.decorate_reader(minibatches, multi_devices=True, num_places=2)())
    assert len(multi) == 2 and all(len(step) == 2 for step in multi)
    with pytest.raises(ValueError, match="left over"):
        list(feeder.decorate_reader(minibatches, True, num_places=2, drop_last=False)())


def test_errors_name_the_variable_and_sample(feeder):
    with pytest.raises(ValueError, match=r"sample 1 has 2 field\(s\); feed_list has 3"):
        feeder.feed([BATCH[0], (1, 2)])
    ragged = [BATCH[0], (np.arange(5), 1, [[1, 2, 3]])]
    with pytest.raises(ValueError, match=r"'img': sample 1 has shape \[5\], sample 0 has \[4\]"):
        feeder.feed(ragged)
    with pytest.raises(ValueError, match=r"'vec' has shape \[None, 3\].*\[1, 1, 2\]"):
        feeder.feed([(np.arange(4), 1, [[1, 2]])])
    with pytest.raises(ValueError, match=r"'vec' expects shape \[None, 3\].*\[1, 2\]"):
        feeder.feed([(np.arange(4), 1, [1, 2])])
    with pytest.raises(ValueError, match=r"'label'.*cannot convert.*int64"):
        feeder.feed([(np.arange(4), "x", [[1, 2, 3]])])


def test_ndarray_rows_are_samples_as_in_fluid():
    """fluid's DataFeeder needs only len() and iteration of a sample: the rows of a 2-D array
    are two-field samples (measured in fluid 1.8.5: float32 and int64 columns of shape (2, 1))."""
    main = fluid.Program()
    with fluid.program_guard(main):
        a = fluid.data("a", [-1, 1], "float32")
        b = fluid.data("b", [-1, 1], "int64")
    feeder = fluid.DataFeeder(feed_list=[a, b], place=fluid.CPUPlace(), program=main)
    got = feeder.feed(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(got["a"], np.array([[1.0], [3.0]], "float32"))
    np.testing.assert_array_equal(got["b"], np.array([[2], [4]], "int64"))
    assert got["a"].dtype == np.float32 and got["b"].dtype == np.int64
    with pytest.raises(ValueError, match=r"sample 0 is a int, not a sequence of fields"):
        feeder.feed([7])
