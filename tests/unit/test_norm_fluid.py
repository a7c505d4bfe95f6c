"""Normalization layers and ops against stored outputs of real fluid (PaddlePaddle 1.8.5,
tests/oracle/make_norm.py): spectral_norm's and group_norm's gradients (fluid's formulas, which
are not the exact derivatives: see the kernels' docstrings), batch_norm with a Variable
momentum (which fluid 1.8 never reads) and inplace_abn writing over its input.

fluid's inplace_abn backward writes the recovered input back over the shared variable, so after
a training step fetching it gives the layer's input there; spmd's still holds the result (the
stored cases fetch it only from forward-only programs)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_norm import CASES, FEEDS, declare, names
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("norm")


def _run(build):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        fetch = build(fluid, prog.global_block(), declare(fluid, FEEDS))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(prog, feed=FEEDS, fetch_list=fetch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    if name == "batch_norm_momentum_var":  # fluid never reads it: spmd says so
        with pytest.warns(UserWarning, match="momentum"):
            got = _run(CASES[name])
    else:
        got = _run(CASES[name])
    want = ORACLE[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{name}[{i}]")


def test_momentum_variable_warns_and_is_not_read():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [4, 3], "float32")
        with pytest.warns(UserWarning, match="never reads"):
            fluid.layers.batch_norm(x, momentum=fluid.layers.fill_constant([1], "float32", 0.5))


def _bn_step(in_place, layer):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [4, 3], "float32")
        h = fluid.layers.fc(x, 3, bias_attr=False, param_attr=fluid.ParamAttr(
            name="w", initializer=fluid.initializer.NumpyArrayInitializer(
                np.arange(9, dtype="float32").reshape(3, 3) / 9 - 0.4)))
        y = layer(h, in_place)
        weight = fluid.layers.assign(np.arange(12, dtype="float32").reshape(4, 3))
        loss = fluid.layers.reduce_sum(fluid.layers.square(y) * weight)
        (grad,) = fluid.gradients([loss], [prog.global_block().var("w")])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"x": FEEDS["bx"]}
    return (y is h), exe.run(prog, feed=feed, fetch_list=[grad, y, h])


@pytest.mark.parametrize("layer", [
    lambda h, in_place: fluid.layers.batch_norm(h, in_place=in_place),
    lambda h, in_place: (fluid.layers.inplace_abn(h, act="elu", act_alpha=0.5) if in_place
                         else fluid.layers.elu(fluid.layers.batch_norm(h), alpha=0.5)),
    lambda h, in_place: fluid.layers.data_norm(h, in_place=in_place, name="dn_ip",
                                               enable_scale_and_shift=True),
], ids=["batch_norm", "inplace_abn", "data_norm"])
def test_writing_over_the_input_keeps_the_gradient(layer):
    """The layer's output is its input Variable (fetching it gives the result) and the
    gradients are those of the out-of-place layer: the backward reads the old value."""
    same, (g_in, y_in, h_in) = _bn_step(True, layer)
    _, (g_out, y_out, _) = _bn_step(False, layer)
    assert same
    np.testing.assert_allclose(g_in, g_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_in, y_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h_in, y_out, rtol=1e-5, atol=1e-6)


def test_inplace_abn_on_a_fed_variable_writes_a_new_one():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [4, 3], "float32")
        with pytest.warns(UserWarning, match="new variable"):
            y = fluid.layers.inplace_abn(x, act="leaky_relu")
    assert y is not x


def test_output_names_as_fluid():
    """group_norm / spectral_norm / data_norm name their outputs _generated_var_<n> in fluid,
    so a later unnamed global variable (saved by name in checkpoints) gets the same name."""
    assert names(fluid) == ORACLE["names"]


@pytest.mark.parametrize("kwargs", [{"bias_attr": False}, {"param_attr": False}])
def test_layer_norm_refuses_a_false_attr_it_needs(kwargs):
    # fluid 1.8.5 asserts "bias_attr should not be False when using shift." (scale alike)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [4, 3], "float32")
        with pytest.raises(InvalidArgumentError, match="attr is False"):
            fluid.layers.layer_norm(x, **kwargs)
