"""fluid.dygraph layers in a static program, as fluid 1.8.5 builds and runs them
(tests/oracle/make_static_dygraph_layers.py): a fluid.Layer subclass with create_parameter
and sublayers, Embedding, LayerNorm, RowConv and SequenceConv; parameter names, outputs and
one SGD step against fluid's numbers, and each layer against the fluid.layers op it wraps."""
import os
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from tests.oracle_io import load

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "oracle"))
from static_dygraph_layers_net import run  # noqa: E402

CASES = load("static_dygraph_layers")


def test_names_outputs_and_a_training_step_match_fluid():
    names, layer_params, outs, after = run(fluid)
    assert names == CASES["names"]
    assert layer_params == CASES["layer_params"]
    for got, want in zip(outs, CASES["outs"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for name, want in CASES["after"].items():
        np.testing.assert_allclose(after[name], want, rtol=1e-5, atol=1e-6, err_msg=name)


def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fetch = build()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        return [np.array(v) for v in exe.run(main, feed=feed, fetch_list=fetch,
                                             return_numpy=False)]


def test_layer_norm_layer_is_the_layer_norm_op_with_unit_scale():
    x = np.random.RandomState(0).uniform(-1, 1, (3, 2, 4)).astype("float32")

    def build():
        v = fluid.data("x", [None, 2, 4], "float32")
        return [fluid.LayerNorm([2, 4])(v)]
    got, = _run(build, {"x": x})
    flat = x.reshape(3, -1)
    want = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want.reshape(x.shape), rtol=1e-5, atol=1e-5)


def test_layer_norm_refuses_a_non_variable_a_wrong_dtype_and_a_wrong_shape():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        norm = fluid.LayerNorm([32, 32])
        with pytest.raises(TypeError):
            norm(np.zeros((3, 32, 32), "float32"))
        with pytest.raises(TypeError):
            norm(fluid.layers.data(name="i", shape=[3, 32, 32], dtype="int32"))
        with pytest.raises(ValueError, match="normalized_shape"):
            norm(fluid.layers.data(name="f", shape=[3, 16], dtype="float32"))


def test_row_conv_and_sequence_conv_layers_equal_the_layers_functions():
    x = np.random.RandomState(1).uniform(-1, 1, (5, 3)).astype("float32")
    lod = [[2, 3]]
    feed = {"x": fluid.create_lod_tensor(x, lod, fluid.CPUPlace())}
    ones = fluid.ParamAttr(initializer=fluid.initializer.ConstantInitializer(0.3))

    def build():
        v = fluid.data("x", [None, 3], "float32", lod_level=1)
        nn = fluid.dygraph.nn
        return [nn.RowConv("rc", future_context_size=1, param_attr=ones)(v),
                fluid.layers.row_conv(v, future_context_size=1, param_attr=ones),
                nn.SequenceConv("sc", num_filters=2, param_attr=ones, bias_attr=ones)(v),
                fluid.layers.sequence_conv(v, num_filters=2, filter_size=3, param_attr=ones,
                                           bias_attr=ones)]
    rc, rc_ref, sc, sc_ref = _run(build, feed)
    np.testing.assert_allclose(rc, rc_ref, rtol=1e-6)
    np.testing.assert_allclose(sc, sc_ref, rtol=1e-6)
    # row_conv by hand: out[t] = sum_{j<=1, t+j in the sequence} 0.3 * x[t+j]
    want = np.concatenate([x[0:2] * 0.3 + np.vstack([x[1:2], np.zeros((1, 3))]) * 0.3,
                           x[2:5] * 0.3 + np.vstack([x[3:5], np.zeros((1, 3))]) * 0.3])
    np.testing.assert_allclose(rc, want, rtol=1e-5)


def test_a_layer_subclass_registers_parameters_and_sublayers():
    class Two(fluid.Layer):
        def __init__(self):
            super().__init__()
            self.inner = fluid.dygraph.nn.Embedding(size=[4, 2])
            self.w = self.create_parameter(shape=[2], dtype="float32")
            self.add_parameter("extra", self.create_parameter(shape=[1], dtype="float32"))

    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        two = Two()
        assert two.full_name() == "two_0"
        assert [p.name for p in two.parameters()] == ["two_0.w_0", "two_0.w_1",
                                                      "embedding_0.w_0"]
        assert [p.name for p in two.parameters(include_sublayers=False)] == ["two_0.w_0",
                                                                             "two_0.w_1"]
        assert two.sublayers() == [two.inner]
        with pytest.raises(InvalidArgumentError, match="forward"):
            two(None)
