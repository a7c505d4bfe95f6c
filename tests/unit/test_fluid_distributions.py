"""fluid.layers' distributions (Uniform, Normal, Categorical, MultivariateNormalDiag) equal
fluid 1.8.5's entropy, log_prob and kl_divergence, from Variable and numpy parameters; samples
have the asked shape and the distribution's moments."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

STORED = load("distributions")  # tests/oracle/make_distributions.py, run in fluid 1.8.5
_MAKER = pathlib.Path(__file__).parents[1] / "oracle" / "make_distributions.py"


def _maker():
    """The oracle script's FEED and build(), executed with spmd.fluid in paddle's place."""
    import types

    source = _MAKER.read_text()
    body = source[source.index("rng = np.random"):source.index('if __name__')]
    module = types.ModuleType("make_distributions_body")
    module.__dict__.update(np=np, fluid=fluid)
    exec(compile(body, str(_MAKER), "exec"), module.__dict__)
    return module


def test_values_equal_fluid():
    maker = _maker()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), pytest.warns(UserWarning, match="float32"):
        outs = maker.build(fluid.layers)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    names = sorted(outs)
    assert names == sorted(STORED)
    got = exe.run(main, feed=maker.FEED, fetch_list=[outs[n] for n in names])
    for name, value in zip(names, got):
        np.testing.assert_allclose(np.asarray(value).reshape(STORED[name].shape),
                                   STORED[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_samples_have_the_shape_and_moments():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        normal = fluid.layers.Normal(1.0, 2.0).sample([20000], seed=3)
        uniform = fluid.layers.Uniform([0.0, 1.0], [1.0, 3.0]).sample([5000], seed=4)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    n, u = exe.run(main, fetch_list=[normal, uniform])
    assert n.shape == (20000,) and u.shape == (5000, 2)
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1
    assert (u[:, 0] >= 0).all() and (u[:, 0] < 1).all() and (u[:, 1] >= 1).all()


def test_argument_checks():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 2], "float32")
        with pytest.raises(ValueError, match="all arguments should be Variable"):
            fluid.layers.Normal(x, 1.0)
        with pytest.raises(TypeError, match="kl_divergence"):
            fluid.layers.Categorical(x).kl_divergence(fluid.layers.Normal(x, x))
        with pytest.raises(TypeError):
            fluid.layers.Uniform("a", 1.0)
        # fluid 1.8.5's check_type: log_prob's value a Variable, sample's seed an int
        for dist in (fluid.layers.Uniform(0.0, 1.0), fluid.layers.Normal(0.0, 1.0)):
            with pytest.raises(TypeError, match="'value' in log_prob"):
                dist.log_prob([1.0, 2.0])
            with pytest.raises(TypeError, match="'seed' in sample"):
                dist.sample([2, 3], 1.0)
            assert list(dist.sample([2, 3], 1).shape) == [2, 3]


def test_the_modules_hold_the_same_classes():
    import spmd.fluid.layers.distributions as distributions

    assert fluid.layers.Normal is distributions.Normal
    assert importlib.util.find_spec("spmd.fluid.layers.distributions") is not None
