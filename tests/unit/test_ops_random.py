"""Random layers: shapes, dtypes, ranges and moments, and repeatability under a program's
random_seed (fluid's exact numbers are not compared: the generators differ)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

L = fluid.layers


def _run(build, seed=5, feed=None, runs=1):
    prog, startup = fluid.Program(), fluid.Program()
    prog.random_seed = seed
    with fluid.program_guard(prog, startup):
        fetch = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return [exe.run(prog, feed=feed or {}, fetch_list=fetch) for _ in range(runs)]


def test_uniform_and_gaussian_moments():
    (u, g, r), = _run(lambda: [L.uniform_random([4000], min=2.0, max=4.0),
                              L.gaussian_random([4000], mean=1.0, std=2.0, dtype="float64"),
                              L.randn([4000])])
    assert u.dtype == np.float32 and u.min() >= 2.0 and u.max() < 4.0
    assert abs(u.mean() - 3.0) < 0.05
    assert g.dtype == np.float64 and abs(g.mean() - 1.0) < 0.15 and abs(g.std() - 2.0) < 0.15
    assert abs(r.mean()) < 0.1 and abs(r.std() - 1.0) < 0.1


def test_seeded_program_repeats_and_runs_differ():
    def build():
        return [L.uniform_random([3, 2]), L.randint(0, 100, [5]), L.randperm(6)]

    a = _run(build, seed=11, runs=2)
    b = _run(build, seed=11, runs=2)
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0][0], a[1][0])  # the generator advances between runs


def test_op_seed_fixes_values():
    (a, b), = _run(lambda: [L.uniform_random([4], seed=3), L.uniform_random([4], seed=3)])
    np.testing.assert_array_equal(a, b)


def test_shape_given_by_variables():
    (u, g), = _run(lambda: [
        L.uniform_random([L.fill_constant([1], "int64", 3), 2]),
        L.gaussian_random(L.assign(np.array([2, 5], "int32")))])
    assert u.shape == (3, 2) and g.shape == (2, 5)


def test_randint_randperm():
    (r, r2, p), = _run(lambda: [L.randint(3, 7, shape=[500]), L.randint(4),
                               L.randperm(8, dtype="int32")])
    assert r.dtype == np.int64 and r.min() == 3 and r.max() == 6
    assert r2.shape == (1,) and 0 <= r2[0] < 4
    assert p.dtype == np.int32 and sorted(p.tolist()) == list(range(8))
    with pytest.raises(InvalidArgumentError, match="low must be less"):
        L.randint(5, 2)


def test_batch_size_like():
    x = np.zeros((6, 2), "float32")

    def build():
        v = fluid.data("x", [-1, 2], "float32")
        return [L.uniform_random_batch_size_like(v, [-1, 3], min=0.0, max=0.5),
                L.gaussian_random_batch_size_like(v, [4, -1], output_dim_idx=1)]

    (u, g), = _run(build, feed={"x": x})
    assert u.shape == (6, 3) and u.min() >= 0.0 and u.max() < 0.5
    assert g.shape == (4, 6)


def test_random_crop_windows_and_seed_sequence():
    x = np.arange(2 * 5 * 6, dtype="float32").reshape(2, 5, 6)

    def build():
        v = fluid.data("x", [2, 5, 6], "float32")
        return [L.random_crop(v, [3, 4], seed=7)]

    runs = _run(build, feed={"x": x}, runs=3)
    for (out,) in runs:
        assert out.shape == (2, 3, 4)
        for i in range(2):  # each crop is a contiguous window of its own instance
            r0, c0 = divmod(int(out[i, 0, 0] - x[i, 0, 0]), 6)
            np.testing.assert_array_equal(out[i], x[i, r0:r0 + 3, c0:c0 + 4])
    again = _run(build, feed={"x": x}, runs=3)
    for (a,), (b,) in zip(runs, again):
        np.testing.assert_array_equal(a, b)


def test_sampling_id_follows_the_rows():
    probs = np.array([[0.0, 1.0, 0.0], [0.2, 0.0, 0.8]] * 500, "float32")

    def build():
        return [L.sampling_id(fluid.data("p", [-1, 3], "float32"))]

    (ids,), = _run(build, feed={"p": probs})
    assert ids.dtype == np.int64 and ids.shape == (1000,)
    assert (ids[0::2] == 1).all()
    second = ids[1::2]
    assert set(second.tolist()) <= {0, 2} and abs((second == 2).mean() - 0.8) < 0.06


def test_randn_error_types_are_fluids():
    """fluid 1.8's randn: a non-list shape and a non-float dtype are TypeErrors (check_type /
    check_dtype), an empty shape an AssertionError (`assert len(shape) > 0`)."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(AssertionError, match="shape must not be empty"):
            L.randn(shape=[])
        with pytest.raises(TypeError, match="list or tuple"):
            L.randn(shape=1)
        for dtype in ("float16", "int32", "int64", "uint8", "bool"):
            with pytest.raises(TypeError, match="float32 or float64"):
                L.randn(shape=[1, 2], dtype=dtype)
        with pytest.raises(InvalidArgumentError):
            L.uniform_random([2], dtype="int32")
        assert L.randn(shape=(2, 3), dtype="float64").shape == (2, 3)
