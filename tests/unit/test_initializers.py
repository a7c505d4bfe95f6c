"""Initializers: the startup op each one prepends, the statistics of the values it makes, and
fluid 1.8's seed rule (seed 0 -> the program's random_seed)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import spmd
import spmd.fluid as fluid
from spmd.core import CPUPlace, Program, Scope
from spmd.errors import InvalidArgumentError
from spmd.layers import initializer as I
from spmd.layers import nn_initializer as P

SHAPE = (200, 100)  # 20000 draws: sample moments within ~1% of the true ones


def init_values(init, shape=SHAPE, dtype="float32", random_seed=0, name="w"):
    """Apply `init` to a fresh parameter of a fresh startup program; return (op, values)."""
    prog = Program()
    prog.random_seed = random_seed
    block = prog.global_block()
    var = block.create_parameter(name=name, shape=shape, dtype=dtype)
    op = init(var, block)
    (values,) = spmd.Executor(CPUPlace()).run(prog, fetch_list=[name], scope=Scope())
    assert values.shape == tuple(shape) and values.dtype == np.dtype(dtype)
    return op, values


def test_constant_fills_exactly():
    op, v = init_values(I.Constant(value=2.5), shape=(3, 4))
    assert op.type == "fill_constant" and op.attr("value") == 2.5
    np.testing.assert_array_equal(v, np.full((3, 4), 2.5, dtype="float32"))
    _, v64 = init_values(I.ConstantInitializer(-1.0), shape=(2,), dtype="float64")
    np.testing.assert_array_equal(v64, [-1.0, -1.0])
    _, vint = init_values(I.Constant(7), shape=(2,), dtype="int64")
    np.testing.assert_array_equal(vint, [7, 7])


def test_uniform_range_and_moments():
    op, v = init_values(I.Uniform(low=-0.5, high=1.5, seed=3))
    assert op.type == "uniform_random"
    assert (op.attr("min"), op.attr("max"), op.attr("seed")) == (-0.5, 1.5, 3)
    assert v.min() >= -0.5 and v.max() < 1.5
    assert abs(v.mean() - 0.5) < 0.02
    assert abs(v.std() - 2.0 / math.sqrt(12)) < 0.02


def test_normal_moments():
    op, v = init_values(I.Normal(loc=1.0, scale=2.0, seed=5))
    assert op.type == "gaussian_random" and (op.attr("mean"), op.attr("std")) == (1.0, 2.0)
    assert abs(v.mean() - 1.0) < 0.05 and abs(v.std() - 2.0) < 0.05


def test_truncated_normal_stays_within_two_std():
    op, v = init_values(I.TruncatedNormal(loc=0.5, scale=0.1, seed=5))
    assert op.type == "truncated_gaussian_random"
    assert v.min() >= 0.5 - 0.2 - 1e-6 and v.max() <= 0.5 + 0.2 + 1e-6
    assert abs(v.mean() - 0.5) < 0.005
    assert 0.07 < v.std() < 0.1  # truncation at 2 std shrinks it to about 0.088


def test_xavier_uniform_and_normal_use_the_fans():
    fan_in, fan_out = SHAPE
    op, v = init_values(I.Xavier(seed=1))
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    assert op.type == "uniform_random" and op.attr("max") == pytest.approx(limit)
    assert np.abs(v).max() <= limit and abs(v.std() - limit / math.sqrt(3)) < 0.01 * limit
    op, v = init_values(I.XavierInitializer(uniform=False, seed=1))
    std = math.sqrt(2.0 / (fan_in + fan_out))
    assert op.type == "gaussian_random" and op.attr("std") == pytest.approx(std)
    assert abs(v.std() - std) < 0.02 * std
    op, _ = init_values(I.Xavier(fan_in=10, fan_out=14), shape=(4, 4))
    assert op.attr("max") == pytest.approx(math.sqrt(6.0 / 24))


def test_conv_filter_fans():
    # [out_channels, in_channels, kh, kw]: fan_in = in * kh * kw, fan_out = out * kh * kw
    op, _ = init_values(I.Xavier(), shape=(8, 4, 3, 3))
    assert op.attr("max") == pytest.approx(math.sqrt(6.0 / (36 + 72)))
    op, _ = init_values(I.MSRA(uniform=False), shape=(8, 4, 3, 3))
    assert op.attr("std") == pytest.approx(math.sqrt(2.0 / 36))


def test_msra_uniform_and_normal():
    fan_in = SHAPE[0]
    op, v = init_values(I.MSRAInitializer(seed=2))
    limit = math.sqrt(6.0 / fan_in)
    assert op.attr("max") == pytest.approx(limit) and np.abs(v).max() <= limit
    op, v = init_values(I.MSRA(uniform=False, seed=2))
    assert abs(v.std() - math.sqrt(2.0 / fan_in)) < 0.02 * math.sqrt(2.0 / fan_in)
    op, _ = init_values(I.MSRA(uniform=False, fan_in=50), shape=(4, 4))
    assert op.attr("std") == pytest.approx(math.sqrt(2.0 / 50))


def test_paddle_names_map_their_arguments():
    assert init_values(P.Constant(3.0), (2,))[1].tolist() == [3.0, 3.0]
    op, _ = init_values(P.Uniform(-2.0, 2.0), (4,))
    assert (op.attr("min"), op.attr("max")) == (-2.0, 2.0)
    op, _ = init_values(P.Normal(mean=1.0, std=0.5), (4,))
    assert (op.type, op.attr("mean"), op.attr("std")) == ("gaussian_random", 1.0, 0.5)
    op, _ = init_values(P.TruncatedNormal(mean=0.0, std=0.02), (4,))
    assert (op.type, op.attr("std")) == ("truncated_gaussian_random", 0.02)
    op, _ = init_values(P.XavierUniform(), (6, 4))
    assert (op.type, op.attr("max")) == ("uniform_random", pytest.approx(math.sqrt(0.6)))
    op, _ = init_values(P.XavierNormal(), (6, 4))
    assert (op.type, op.attr("std")) == ("gaussian_random", pytest.approx(math.sqrt(0.2)))
    op, _ = init_values(P.KaimingUniform(), (6, 4))
    assert op.attr("max") == pytest.approx(math.sqrt(1.0))
    op, _ = init_values(P.KaimingNormal(), (6, 4))
    assert op.attr("std") == pytest.approx(math.sqrt(2.0 / 6))
    op, _ = init_values(P.KaimingNormal(nonlinearity="leaky_relu", negative_slope=1.0), (8, 4))
    assert op.attr("std") == pytest.approx(1.0 / math.sqrt(8))
    assert P.calculate_gain("tanh") == pytest.approx(5.0 / 3.0)
    assert P.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2.0 / (1 + 0.01 ** 2)))


def test_float64_parameters():
    _, v = init_values(I.Uniform(seed=4), (50,), dtype="float64")
    assert v.dtype == np.float64 and np.abs(v).max() <= 1.0


def test_seed_zero_draws_from_the_program_generator_seeded_by_random_seed():
    op, a = init_values(I.Uniform(), (30,), random_seed=11)
    assert op.attr("seed") == 0  # the executor's generator for the program, seeded with 11
    _, b = init_values(I.Uniform(), (30,), random_seed=11)
    np.testing.assert_array_equal(a, b)  # two programs, two executors: same values
    _, c = init_values(I.Uniform(), (30,), random_seed=12)
    assert not np.array_equal(a, c)
    op, _ = init_values(I.Uniform(seed=5), (30,), random_seed=11)
    assert op.attr("seed") == 5  # an explicit seed wins


def test_unseeded_draws_differ_between_runs():
    _, a = init_values(I.Normal(), (30,))
    _, b = init_values(I.Normal(), (30,))
    assert not np.array_equal(a, b)


def test_ops_are_prepended_to_the_startup_block():
    prog = Program()
    block = prog.global_block()
    a = block.create_parameter(name="a", shape=(2,))
    b = block.create_parameter(name="b", shape=(2,))
    I.Constant(1.0)(a, block)
    I.Constant(2.0)(b, block)
    assert [op.output("Out")[0] for op in block.ops] == ["b", "a"]


@pytest.mark.parametrize("make", [
    lambda: I.Uniform(low=1.0, high=0.0),
    lambda: I.Normal(scale=-1.0),
    lambda: I.Uniform(seed=-1),
    lambda: I.Constant(value="one"),
    lambda: I.MSRA(nonlinearity="softsign"),
])
def test_bad_arguments_are_refused(make):
    with pytest.raises(InvalidArgumentError):
        make()


def test_random_initializer_refuses_integer_variables():
    with pytest.raises(InvalidArgumentError, match="int64"):
        init_values(I.Uniform(), (3,), dtype="int64")


def test_equal_shapes_start_different_under_one_random_seed():
    """spmd departs from fluid 1.8 here: fluid copies random_seed into every init op, so equal
    shapes started equal."""
    startup = Program()
    startup.random_seed = 3
    block = startup.global_block()
    a = block.create_parameter(name="a", shape=(4, 4))
    b = block.create_parameter(name="b", shape=(4, 4))
    I.Uniform()(a, block)
    I.Uniform()(b, block)
    scope = spmd.Scope()
    spmd.Executor(spmd.CPUPlace()).run(startup, scope=scope)
    assert not np.array_equal(np.array(scope.find_var("a").get_tensor()),
                              np.array(scope.find_var("b").get_tensor()))


# -- values given: NumpyArrayInitializer, Bilinear ------------------------------------------
# fluid 1.8.5's first 16 Bilinear values of a [2, 1, 4, 4] filter (tests/oracle: printed by
# real fluid for the same program); its (i / K) % K row index uses true division
FLUID_BILINEAR_4X4 = [0.0625, 0.28125, 0.375, 0.15625, 0.1875, 0.65625, 0.75, 0.21875,
                      0.1875, 0.46875, 0.375, 0.09375, 0.0625, 0.09375, 0.0, -0.03125]


def _init_values(shape, dtype, initializer):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.layers.create_parameter(shape, dtype, default_initializer=initializer)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    return np.array(scope.find_var(p.name).get_tensor())


def test_bilinear_equals_fluid():
    got = _init_values([2, 1, 4, 4], "float32", fluid.initializer.Bilinear())
    np.testing.assert_array_equal(got.reshape(-1)[:16], np.float32(FLUID_BILINEAR_4X4))
    np.testing.assert_array_equal(got[0], got[1])
    with pytest.raises(InvalidArgumentError, match="square kernels"):
        _init_values([2, 1, 4, 3], "float32", fluid.initializer.Bilinear())


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_numpy_array_initializer(dtype):
    value = np.arange(6).reshape(2, 3).astype(dtype)
    got = _init_values([2, 3], dtype, fluid.initializer.NumpyArrayInitializer(value))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, value)


def test_numpy_array_initializer_errors():
    with pytest.raises(InvalidArgumentError, match="numpy.ndarray"):
        fluid.initializer.NumpyArrayInitializer([1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="shape"):
        _init_values([3, 2], "float32",
                     fluid.initializer.NumpyArrayInitializer(np.zeros((2, 3), "float32")))
    with pytest.raises(InvalidArgumentError, match="float64"):
        _init_values([2], "float64", fluid.initializer.NumpyArrayInitializer(np.zeros(2)))
