"""Gradients of gradients (spmd/autodiff/double_grad.py, the double-grad ops of
spmd/ops/grad_grad.py): a second fluid.gradients over the first one's grad ops, against central
finite differences of the first gradient, as Paddle 1.8's gradient_checker.double_grad_check
checks them; and each double-grad op's kernel against numpy.

The check: y = f(xs); dxs = gradients(y, xs, target_gradients=dy); then
gradients(dxs, xs + [dy], target_gradients=ddxs) must be the gradient of
L(xs, dy) = sum_i <dxs_i, ddxs_i>, which finite differences of the first program give.
"""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.op_harness import OpCase, check_forward

RNG = np.random.default_rng(20261202)


def _uniform(shape, low=-1.0, high=1.0, away=None):
    x = RNG.uniform(low, high, size=shape)
    if away is not None:  # kinks (relu's 0) kept out of the finite differences' reach
        x[np.abs(x) < away] = away * 2
    return x


def _build(make, inputs):
    """A program with y = make(*vars), the first gradients seeded by dy, and the second
    gradients seeded by ddx; returns (program, names)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        xs = []
        for name, value in inputs.items():
            v = fluid.data(name, list(value.shape), "float64")
            v.stop_gradient = False
            xs.append(v)
        y = make(*xs)
        dy = fluid.data("dy", list(y.shape), "float64")
        dy.stop_gradient = False
        dxs = fluid.gradients(y, xs, dy)
        keep = [(x, d) for x, d in zip(xs, dxs) if d is not None]
        ddxs = [fluid.data(f"dd_{x.name}", list(x.shape), "float64") for x, _ in keep]
        firsts = [d for _, d in keep]
        seconds = fluid.gradients(firsts, xs + [dy], ddxs)
    return main, startup, y, keep, ddxs, seconds


def _run(prog, feed, fetch, scope=None):
    return fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=fetch,
                                                scope=scope or fluid.Scope())


def check_double_grad(make, inputs: dict, eps=1e-6, rtol=1e-5, atol=1e-7):
    prog, startup, y, keep, ddxs, seconds = _build(make, inputs)
    scope = fluid.Scope()  # the parameters (conv's filter, instance_norm's scale) stay put
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    y_shape = tuple(y.shape)  # every shape is known: the data have no -1
    feed = dict(inputs)
    feed["dy"] = RNG.uniform(0.5, 1.5, size=y_shape)
    for dd, (x, _) in zip(ddxs, keep):
        feed[dd.name] = RNG.uniform(-1.0, 1.0, size=inputs[x.name].shape)
    firsts = [d for _, d in keep]

    def loss(f):
        got = _run(prog, f, firsts, scope)
        return sum(float(np.sum(g * f[dd.name])) for g, dd in zip(got, ddxs))

    names = list(inputs) + ["dy"]
    analytic = _run(prog, feed, [s for s in seconds if s is not None], scope)
    analytic = iter(analytic)
    for name, s in zip(names, seconds):
        base = feed[name]
        numeric = np.zeros_like(base)
        flat = numeric.reshape(-1)
        for j in range(flat.size):
            plus, minus = dict(feed), dict(feed)
            p, m = base.copy().reshape(-1), base.copy().reshape(-1)
            p[j] += eps
            m[j] -= eps
            plus[name], minus[name] = p.reshape(base.shape), m.reshape(base.shape)
            flat[j] = (loss(plus) - loss(minus)) / (2 * eps)
        if s is None:  # no path: the second derivative is zero there
            np.testing.assert_allclose(numeric, 0.0, atol=atol * 10, err_msg=name)
            continue
        np.testing.assert_allclose(next(analytic), numeric, rtol=rtol, atol=atol,
                                   err_msg=f"d/d{name} of the first gradient")


L = fluid.layers


def _scale(value):
    return fluid.ParamAttr(initializer=fluid.initializer.Constant(value))


CASES = {
    "relu": (lambda x: L.relu(x), {"x": _uniform((2, 3, 4), away=0.05)}),
    "leaky_relu": (lambda x: L.leaky_relu(x, alpha=0.2), {"x": _uniform((3, 5), away=0.05)}),
    "elu": (lambda x: L.elu(x, alpha=1.1), {"x": _uniform((3, 5), away=0.05)}),
    "sqrt": (lambda x: L.sqrt(x), {"x": _uniform((3, 4), 0.1, 1.0)}),
    "square": (lambda x: L.square(x), {"x": _uniform((3, 4))}),
    "add_broadcast": (lambda x, y: L.elementwise_add(x, y, axis=0),
                      {"x": _uniform((2, 3, 4)), "y": _uniform((2, 3))}),
    "sub": (lambda x, y: L.elementwise_sub(x, y), {"x": _uniform((3, 4)), "y": _uniform((3, 4))}),
    "mul_broadcast": (lambda x, y: L.elementwise_mul(x, y, axis=0),
                      {"x": _uniform((2, 3, 4)), "y": _uniform((2, 3))}),
    "mul_self": (lambda x: x * x, {"x": _uniform((3, 2))}),
    "div_broadcast": (lambda x, y: L.elementwise_div(x, y, axis=1),
                      {"x": _uniform((2, 3, 4)), "y": _uniform((3,), 0.5, 1.5)}),
    "matmul_mul": (lambda x, y: L.mul(x, y), {"x": _uniform((2, 5)), "y": _uniform((5, 3))}),
    "conv2d": (lambda x: L.conv2d(x, 2, 3, padding=1, bias_attr=False,
                                  param_attr=fluid.initializer.Uniform(-1, 1, seed=3)),
               {"x": _uniform((2, 3, 4, 4))}),
    "reshape": (lambda x: L.square(L.reshape(x, [4, 3])), {"x": _uniform((2, 6))}),
    "transpose": (lambda x: L.square(L.transpose(x, [1, 0])), {"x": _uniform((2, 3))}),
    "slice": (lambda x: L.square(L.slice(x, axes=[1], starts=[1], ends=[3])),
              {"x": _uniform((2, 4))}),
    "reduce_mean": (lambda x: L.square(L.reduce_mean(x, dim=0)), {"x": _uniform((3, 4))}),
    "mean": (lambda x: L.square(L.mean(x)), {"x": _uniform((3, 4))}),
    "pad": (lambda x: L.square(L.pad(x, [1, 0, 0, 2])), {"x": _uniform((2, 3))}),
    "instance_norm": (lambda x: L.instance_norm(x), {"x": _uniform((2, 3, 2, 3))}),
    "batch_norm": (lambda x: L.batch_norm(x, param_attr=_scale(1.3)),
                   {"x": _uniform((3, 2, 2, 2))}),
    "batch_norm_nhwc": (lambda x: L.batch_norm(x, data_layout="NHWC", param_attr=_scale(0.7)),
                        {"x": _uniform((2, 2, 2, 3))}),
    "batch_norm_global_stats": (
        lambda x: L.square(L.batch_norm(x, use_global_stats=True, param_attr=_scale(1.3))),
        {"x": _uniform((3, 2, 2, 2))}),
    "batch_norm_2d": (lambda x: L.batch_norm(x), {"x": _uniform((5, 3))}),
    "tanh": (lambda x: L.tanh(x), {"x": _uniform((3, 4))}),
    "sigmoid": (lambda x: L.sigmoid(x), {"x": _uniform((3, 4))}),
    "matmul_transposed": (lambda x, y: L.matmul(x, y, transpose_y=True, alpha=0.5),
                          {"x": _uniform((2, 3, 4)), "y": _uniform((2, 5, 4))}),
    "concat": (lambda x, y: L.square(L.concat([x, y], axis=1)),
               {"x": _uniform((2, 3)), "y": _uniform((2, 2))}),
    "concat_one_input_needed": (
        lambda x: L.square(L.concat([x, L.fill_constant([2, 2], "float64", 0.5)], axis=1)),
        {"x": _uniform((2, 3))}),
    "dropout": (  # a fixed seed: every run draws the same mask
        lambda x: L.square(L.dropout(x, 0.3, seed=1, dropout_implementation="upscale_in_train")),
        {"x": _uniform((3, 4))}),
    "avg_pool": (lambda x: L.square(L.pool2d(x, 2, "avg", 2)), {"x": _uniform((2, 1, 4, 4))}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_gradient_matches_finite_differences(name):
    make, inputs = CASES[name]
    tol = dict(rtol=1e-4, atol=1e-6) if "norm" in name else {}
    check_double_grad(make, inputs, **tol)


def test_conv2d_second_gradient_reaches_the_filter():
    """The filter is a parameter: its second gradient (through dX and dW) as well."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [1, 2, 3, 3], "float64")
        x.stop_gradient = False
        y = L.conv2d(x, 2, 2, bias_attr=False, param_attr=fluid.ParamAttr(name="w"))
        w = main.global_block().var("w")
        dx, dw = fluid.gradients(L.reduce_sum(L.square(y)), [x, w])
        ddx, ddw = fluid.gradients([dx, dw], [x, w])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = _uniform((1, 2, 3, 3))
    got = exe.run(main, feed={"x": xv}, fetch_list=[ddx, ddw], scope=scope)
    wv = np.array(scope.find_var("w").get_tensor())

    def first(xa, wa):  # d/dx, d/dw of sum(conv(x, w)^2) in numpy, then summed
        out = np.einsum("nchwij,fcij->nfhw", _patches(xa), wa)
        gx = np.zeros_like(xa)
        gw = np.einsum("nfhw,nchwij->fcij", 2 * out, _patches(xa))
        for i in range(2):
            for j in range(2):
                gx[:, :, i:i + 2, j:j + 2] += np.einsum("nfhw,fc->nchw", 2 * out, wa[:, :, i, j])
        return gx.sum() + gw.sum()

    eps = 1e-6
    for arr, want, which in ((xv, got[0], 0), (wv, got[1], 1)):
        num = np.zeros_like(arr)
        for k in range(arr.size):
            p, m = arr.copy().reshape(-1), arr.copy().reshape(-1)
            p[k] += eps
            m[k] -= eps
            args_p = (p.reshape(arr.shape), wv) if which == 0 else (xv, p.reshape(arr.shape))
            args_m = (m.reshape(arr.shape), wv) if which == 0 else (xv, m.reshape(arr.shape))
            num.reshape(-1)[k] = (first(*args_p) - first(*args_m)) / (2 * eps)
        np.testing.assert_allclose(want, num, rtol=1e-5, atol=1e-7)


def _patches(x):
    """[n, c, 2, 2, 2, 2]: the 2x2 windows of a 3x3 image (stride 1, no padding)."""
    return np.stack([np.stack([x[:, :, i:i + 2, j:j + 2] for j in range(2)], -1)
                     for i in range(2)], -2)


def test_given_target_gradient_named_like_the_targets_gradient():
    """fluid.gradients(y, x, dy) with dy named y@GRAD (double_grad_check names it so): dy is
    y's gradient, read where it is, not renamed away."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [3], "float64")
        x.stop_gradient = False
        y = L.square(x)
        dy = main.global_block().create_var(name=y.name + "@GRAD", shape=[3], dtype="float64",
                                            persistable=True)
        dx, = fluid.gradients(y, x, dy)
    got, = _run(main, {"x": np.array([1.0, 2.0, 3.0]), y.name + "@GRAD": np.ones(3) * 2}, [dx])
    np.testing.assert_allclose(got, [4.0, 8.0, 12.0])


def test_target_gradient_of_another_shape_is_refused():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.data("x", [3], "float64")
        x.stop_gradient = False
        y = L.square(x)
        dy = fluid.data("dy", [2], "float64")
        with pytest.raises(ValueError, match="target_gradient 'dy' has shape \\[2\\]"):
            fluid.gradients(y, x, dy)


@pytest.mark.parametrize("layer, op", [
    (lambda x: L.pool2d(x, 2, "max", 2), "pool2d_grad"),
    (lambda x: L.softmax(x), "softmax_grad")])
def test_a_grad_op_without_a_gradient_is_refused(layer, op):
    """A second pass through a grad op that has no gradient of its own fails, naming it (as
    fluid 1.8's does), instead of giving a second-order gradient with that part left out."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = fluid.data("x", [2, 1, 4, 4], "float64")
        x.stop_gradient = False
        dx, = fluid.gradients(L.reduce_sum(L.square(layer(x))), x)
        with pytest.raises(NotImplementedError, match=op):
            fluid.gradients(L.reduce_sum(L.square(dx)), x)


# -- the double-grad kernels against numpy ---------------------------------------------------

def _vjp(fn, args: dict, wrt: str, weight, eps=1e-6):
    """d <fn(**args), weight> / d args[wrt] by central differences of a numpy function."""
    base = args[wrt]
    out = np.zeros_like(base)
    for j in range(base.size):
        p, m = base.copy().reshape(-1), base.copy().reshape(-1)
        p[j] += eps
        m[j] -= eps
        fp = fn(**{**args, wrt: p.reshape(base.shape)})
        fm = fn(**{**args, wrt: m.reshape(base.shape)})
        out.reshape(-1)[j] = np.sum((fp - fm) * weight) / (2 * eps)
    return out


def _div_dx_dy(y, out, dout):
    ya = y.reshape(1, -1, 1)
    return dout / ya, -(dout * out / ya).sum(axis=(0, 2))


def _div_ref(Y, Out, DOut, DDX, DDY, axis):
    def first(y, out, dout):
        dx, dy = _div_dx_dy(y, out, dout)
        return np.concatenate([dx.reshape(-1), dy.reshape(-1)])
    w = np.concatenate([DDX.reshape(-1), DDY.reshape(-1)])
    args = {"y": Y, "out": Out, "dout": DOut}
    return {"Y@GRAD": _vjp(first, args, "y", w), "Out@GRAD": _vjp(first, args, "out", w),
            "DDOut": _vjp(first, args, "dout", w)}


def _instance_norm_dx(x, dy, scale, eps=1e-5):
    n, c = x.shape[:2]
    g = x.reshape(n, c, -1)
    mu, var = g.mean(2, keepdims=True), g.var(2, keepdims=True)
    s = 1 / np.sqrt(var + eps)
    xh = (g - mu) * s
    b = dy.reshape(n, c, -1) * scale.reshape(1, c, 1)
    dx = s * (b - b.mean(2, keepdims=True) - xh * (b * xh).mean(2, keepdims=True))
    return dx.reshape(x.shape)


def _instance_norm_ref(X, Scale, DY, DDX, epsilon):
    args = {"x": X, "dy": DY, "scale": Scale}
    return {"DX": _vjp(_instance_norm_dx, args, "x", DDX),
            "DDY": _vjp(_instance_norm_dx, args, "dy", DDX),
            "DScale": _vjp(_instance_norm_dx, args, "scale", DDX)}


_x_, _dout_, _ddx_ = (_uniform((3, 4), away=0.05) for _ in range(3))
_pos = _uniform((3, 4), 0.2, 1.0)

KERNEL_CASES = [
    OpCase("relu_grad_grad", {"Out": np.maximum(_x_, 0), "DDX": _ddx_},
           ref=lambda Out, DDX: {"DDOut": DDX * (Out > 0)}),
    OpCase("leaky_relu_grad_grad", {"X": _x_, "DDX": _ddx_}, attrs={"alpha": 0.3},
           ref=lambda X, DDX, alpha: {"DDOut": np.where(X > 0, DDX, alpha * DDX)}),
    OpCase("elu_grad_grad", {"X": _x_, "DOut": _dout_, "DDX": _ddx_}, attrs={"alpha": 0.7},
           ref=lambda X, DOut, DDX, alpha: {
               "DX": np.where(X > 0, 0.0, DDX * DOut * alpha * np.exp(X)),
               "DDOut": np.where(X > 0, DDX, DDX * alpha * np.exp(X))}),
    OpCase("square_grad_grad", {"X": _x_, "DOut": _dout_, "DDX": _ddx_},
           ref=lambda X, DOut, DDX: {"DX": 2 * DDX * DOut, "DDOut": 2 * X * DDX}),
    OpCase("sqrt_grad_grad", {"Out": np.sqrt(_pos), "DX": _dout_, "DDX": _ddx_},
           ref=lambda Out, DX, DDX: {"DOut": -DDX * DX / Out, "DDOut": 0.5 * DDX / Out}),
    OpCase("reshape2_grad_grad", {"DOut": _uniform((4, 3)), "DDX": _ddx_},
           ref=lambda DOut, DDX: {"DDOut": DDX.reshape(4, 3)}),
    OpCase("elementwise_div_grad_grad",
           {"Y": _uniform((3,), 0.5, 1.5), "Out": _uniform((2, 3, 2)),
            "DOut": _uniform((2, 3, 2)), "DDX": _uniform((2, 3, 2)), "DDY": _uniform((3,))},
           attrs={"axis": 1}, ref=_div_ref, rtol=1e-6, atol=1e-8, fp32_rtol=1e-3,
           fp32_atol=1e-4),
    OpCase("instance_norm_grad_grad",
           {"X": _uniform((2, 3, 4)), "Scale": _uniform((3,)), "DY": _uniform((2, 3, 4)),
            "DDX": _uniform((2, 3, 4))},
           attrs={"epsilon": 1e-5}, ref=_instance_norm_ref, rtol=1e-6, atol=1e-7,
           fp32_rtol=1e-2, fp32_atol=1e-3),
]


@pytest.mark.parametrize("case", KERNEL_CASES, ids=str)
def test_double_grad_kernel_against_numpy(case):
    check_forward(case, "float64", rtol=case.rtol, atol=case.atol)
    check_forward(case, "float32", rtol=case.fp32_rtol, atol=case.fp32_atol)
