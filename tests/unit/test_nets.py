"""fluid.layers conv / pool / norm / vision builders and fluid.nets against stored outputs of
real fluid (PaddlePaddle 1.8.5, tests/oracle/make_vision.py): same programs, same parameter
names, every parameter set to the same fixed values."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_vision import CASES, run_case
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("vision")


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got, params = run_case(fluid, name)
    want = ORACLE[name]
    assert params == want["params"], f"{name}: parameter names differ from fluid's"
    assert len(got) == len(want["outs"])
    for i, (g, w) in enumerate(zip(got, want["outs"])):
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape} != fluid's {w.shape}"
        assert g.dtype == w.dtype, f"{name}[{i}]: dtype {g.dtype} != fluid's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{name}[{i}]")


def _build(fn, feeds):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
        fetch = fn(vs)
    return prog, startup, fetch


def _run(fn, feeds):
    prog, startup, fetch = _build(fn, feeds)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)


X = np.random.default_rng(3).uniform(-1, 1, (2, 4, 6, 6)).astype("float32")


def test_global_pooling_ignores_pool_size():
    (a, b) = _run(lambda d: [
        fluid.layers.pool2d(d["x"], pool_size=0, pool_type="avg", global_pooling=True),
        fluid.layers.pool2d(d["x"], pool_size=[7, 3], pool_type="max", global_pooling=True)],
        {"x": X})
    np.testing.assert_allclose(a[:, :, 0, 0], X.mean(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(b[:, :, 0, 0], X.max(axis=(2, 3)))


def test_runtime_sizes_and_momentum_tensor():
    size = np.array([3, 9], "int32")

    def build(d):
        s = fluid.layers.assign(size)
        h = fluid.layers.fill_constant([1], "int32", 4)
        return [fluid.layers.resize_bilinear(d["x"], out_shape=s),
                fluid.layers.resize_nearest(d["x"], out_shape=[h, 5]),
                fluid.layers.batch_norm(d["x"], momentum=fluid.layers.fill_constant(
                    [1], "float32", 0.5))]

    a, b, c = _run(build, {"x": X})
    assert a.shape == (2, 4, 3, 9) and b.shape == (2, 4, 4, 5) and c.shape == X.shape


def test_training_step_through_new_layers():
    """Every new layer's gradient path runs in one SGD step: each parameter gets a gradient
    and every weight changes."""
    def build(d):
        x = d["x"]
        y = fluid.layers.conv2d(x, 4, 3, padding=1, data_format="NCHW", groups=2)
        y = fluid.layers.group_norm(y, 2, param_attr=fluid.ParamAttr(),
                                    bias_attr=fluid.ParamAttr())
        y = fluid.layers.conv2d_transpose(y, 3, filter_size=2, stride=2)
        y = fluid.layers.instance_norm(fluid.layers.resize_bilinear(y, [6, 6]))
        y = fluid.layers.inplace_abn(fluid.layers.lrn(y, n=3, alpha=0.5), act="elu")
        y = fluid.layers.reshape(y, [-1, 3, 2, 6, 3])
        y = fluid.layers.conv3d(y, 2, 2, padding=1)
        y = fluid.layers.adaptive_pool3d(y, 2, "avg")
        loss = fluid.layers.reduce_mean(y * y)
        fluid.optimizer.SGD(0.5).minimize(loss)
        return [loss]

    prog, startup, fetch = _build(build, {"x": X})
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    names = [p.name for p in prog.global_block().all_parameters() if p.trainable]
    written = {n for op in prog.global_block().ops for n in op.output_arg_names}
    assert [n for n in names if n + "@GRAD" not in written] == []
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    (loss,) = exe.run(prog, feed={"x": X}, fetch_list=fetch, scope=scope)
    assert np.isfinite(loss).all()
    # a bias right before a normalization has a zero gradient; the weights all move
    moved = [n for n in names
             if not np.allclose(before[n], np.array(scope.find_var(n).get_tensor()))]
    assert {n for n in names if n.endswith(".w_0")} <= set(moved)


@pytest.mark.parametrize("call, match", [
    (lambda x: fluid.layers.pool2d(x, 2, pool_padding="VALID", ceil_mode=True), "ceil_mode"),
    (lambda x: fluid.layers.pool2d(x), "pool_size"),
    (lambda x: fluid.layers.conv2d_transpose(x, 2), "output_size"),
    (lambda x: fluid.layers.adaptive_pool2d(x, 2, "avg", require_index=True), "require_index"),
    (lambda x: fluid.layers.inplace_abn(x, act="relu"), "act"),
    (lambda x: fluid.layers.image_resize(x), "out_shape or scale"),
    (lambda x: fluid.layers.image_resize(x, resample="TRILINEAR", scale=2), "5-D"),
    (lambda x: fluid.layers.group_norm(x, 3), "divisor"),
    (lambda x: fluid.layers.conv3d(x, 2, 3), "5-D"),
    (lambda x: fluid.layers.maxout(x, 3), "divisor"),
    (lambda x: fluid.layers.conv2d(x, 4, 3, padding=[[0, 1], [0, 0], [1, 1], [1, 1]]),
     "batch and channel"),
    (lambda x: fluid.nets.img_conv_group(x, [2, 2], 2, conv_padding=[1, 1, 1]), "entries"),
])
def test_builder_errors_name_the_problem(call, match):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [2, 4, 6, 6], "float32")
        with pytest.raises(InvalidArgumentError, match=match):
            call(x)


def test_group_norm_params_only_when_attrs_given():
    with fluid.program_guard(fluid.Program(), fluid.Program()) as _:
        x = fluid.data("x", [2, 4, 6, 6], "float32")
        fluid.layers.group_norm(x, 2)
        prog = fluid.default_main_program()
        assert prog.global_block().all_parameters() == []
        fluid.layers.group_norm(x, 2, param_attr=fluid.ParamAttr(name="gs"))
        assert [p.name for p in prog.global_block().all_parameters()] == ["gs"]


def test_deformable_conv_without_deformation_is_conv2d():
    """fluid 1.8.5's CPU deformable_conv returns zeros, so it is no oracle here; the op is
    checked against a numpy DCN reference in test_ops_conv.py, and the layer here: zero
    offsets and a unit mask make it conv2d."""
    n, oh, ow = 2, 4, 4
    feeds = {"x": X, "off": np.zeros((n, 2 * 2 * 9, oh, ow), "float32"),
             "off1": np.zeros((n, 2 * 9, oh, ow), "float32"),
             "mask": np.ones((n, 2 * 9, oh, ow), "float32")}
    const = fluid.initializer.Constant(0.25)

    def build(d):
        kw = dict(param_attr=fluid.ParamAttr(name="w", initializer=const),
                  bias_attr=fluid.ParamAttr(name="b", initializer=const))
        return [fluid.layers.deformable_conv(d["x"], d["off"], d["mask"], 4, 3,
                                             dilation=[2, 1], groups=2, deformable_groups=2,
                                             padding=[1, 0], **kw),
                fluid.layers.deformable_conv(d["x"], d["off1"], None, 4, 3,
                                             dilation=[2, 1], groups=2, padding=[1, 0],
                                             modulated=False, **kw),
                fluid.layers.conv2d(d["x"], 4, 3, dilation=[2, 1], groups=2, padding=[1, 0],
                                    **kw)]

    v2, v1, conv = _run(build, feeds)
    assert conv.shape == (n, 4, oh, ow)
    np.testing.assert_allclose(v2, conv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v1, conv, rtol=1e-5, atol=1e-6)


def test_scaled_dot_product_attention_error_types_are_fluids():
    """fluid 1.8 raises TypeError when the dtypes differ (checked first) and ValueError for a
    wrong rank, hidden size or length."""
    nets = fluid.nets
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        q = fluid.data(name="q", shape=[3, 5, 9], dtype="float32")
        k = fluid.data(name="k", shape=[3, 6, 9], dtype="float32")
        v = fluid.data(name="v", shape=[3, 6, 10], dtype="float32")
        k64 = fluid.data(name="k64", shape=[3, 6, 9], dtype="float64")
        v64 = fluid.data(name="v64", shape=[3, 6, 10], dtype="float64")
        with pytest.raises(TypeError, match="share a dtype"):
            nets.scaled_dot_product_attention(q, k64, v64)
        k2 = fluid.data(name="k2", shape=[3, 6], dtype="float64")
        with pytest.raises(TypeError, match="share a dtype"):  # dtype before rank, as fluid
            nets.scaled_dot_product_attention(q, k2, v64)
        k2f = fluid.data(name="k2f", shape=[3, 6], dtype="float32")
        with pytest.raises(ValueError, match="3-D"):
            nets.scaled_dot_product_attention(q, k2f, v)
        k10 = fluid.data(name="k10", shape=[3, 6, 10], dtype="float32")
        with pytest.raises(ValueError, match="hidden sizes differ"):
            nets.scaled_dot_product_attention(q, k10, v)
        assert nets.scaled_dot_product_attention(q, k, v).shape[-1] == 10
