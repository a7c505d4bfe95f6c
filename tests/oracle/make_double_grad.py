"""fluid 1.8's gradients of gradients (fluid.gradients over an earlier fluid.gradients' grad ops:
its double-grad ops), and what its while_loop gradient gives where it is not the derivative,
for tests/unit/test_double_grad_fluid.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_double_grad.py

CASES maps a name to build(fluid, vars) -> list of Variables to fetch; the test runs the same
build with spmd.fluid on the same FEEDS (float64 feeds are differentiable leaves).
WHILE_CASES are Paddle's test_while_loop_op.py backward program at other sizes.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(11)
FEEDS = {
    "x": R.uniform(-1, 1, (2, 3)).astype("float64"),
    "z": R.uniform(0.5, 1.5, (2, 3)).astype("float64"),
    "w": R.uniform(-1, 1, (3, 4)).astype("float64"),
    "img": R.uniform(-1, 1, (2, 2, 4, 4)).astype("float64"),
    "flt": R.uniform(-1, 1, (3, 2, 3, 3)).astype("float64"),
    "b": R.uniform(-1, 1, (3,)).astype("float64"),
}


def _activations_x(fluid, d):
    L = fluid.layers
    x = d["x"]
    t = L.elu(x, alpha=0.7) + L.leaky_relu(x, alpha=0.2) * 2.0 + L.relu(x) * 3.0
    dx, = fluid.gradients(L.reduce_sum(t * t * 0.5 + t), [x])
    return [dx] + list(fluid.gradients(L.reduce_sum(dx * dx), [x]))


def _activations_z(fluid, d):
    L = fluid.layers
    x, z = d["x"], d["z"]
    out = L.reduce_sum(L.sqrt(z) * x + L.square(z) * x * x)
    dx, dz = fluid.gradients(out, [x, z])
    return [dx, dz] + list(fluid.gradients(L.reduce_sum(dz * x), [x, z]))


def _div(fluid, d):
    # (fluid 1.8.5's elementwise_div_grad_grad fails when only dY's gradient flows: "The
    # Input Variable(DDX) ... is empty", so the second pass here differentiates dX)
    L = fluid.layers
    x, z = d["x"], d["z"]
    dx, dz = fluid.gradients(L.reduce_sum(L.elementwise_div(x, z) * x), [x, z])
    return [dx, dz] + list(fluid.gradients(L.reduce_sum(dx * dx), [x, z]))


def _activations_both(fluid, d):
    """fluid 1.8.5 is wrong here (its second gradient of x is not the finite differences'):
    both first gradients feed the second pass."""
    L = fluid.layers
    x, z = d["x"], d["z"]
    out = L.reduce_sum(L.elu(x, alpha=0.7) * L.sqrt(z) + L.leaky_relu(x, alpha=0.2) * x / z
                       + L.relu(x) * L.square(z))
    dx, dz = fluid.gradients(out, [x, z])
    g = L.reduce_sum(dx * dx) + L.reduce_sum(dz * x)
    return [dx, dz] + list(fluid.gradients(g, [x, z]))


def _mul_broadcast(fluid, d):
    L = fluid.layers
    x, w, b = d["x"], d["w"], d["b"]
    h = L.elementwise_add(L.elementwise_mul(x, b, axis=1), x)
    out = L.reduce_mean(L.square(L.mul(h, w)))
    dx, dw, db = fluid.gradients(out, [x, w, b])
    g = L.reduce_sum(L.square(dx)) + L.reduce_sum(dw * dw) + L.reduce_sum(L.sqrt(db * db + 1))
    return [dx, dw, db] + list(fluid.gradients(g, [x, w, b]))


def _conv(fluid, d):
    L = fluid.layers
    img, flt = d["img"], d["flt"]
    y = L.reshape(L.elementwise_sub(img, L.relu(img)), [2, 2, 4, 4])
    out = fluid.layers.nn.reduce_sum(L.square(_conv2d(fluid, y, flt)))
    di, df = fluid.gradients(out, [img, flt])
    g = L.reduce_sum(di * di) + L.reduce_sum(L.square(df))
    return [di, df] + list(fluid.gradients(g, [img, flt]))


def _conv2d(fluid, x, flt):
    helper = fluid.layer_helper.LayerHelper("conv2d")
    out = helper.create_variable_for_type_inference("float64")
    helper.append_op(type="conv2d", inputs={"Input": [x], "Filter": [flt]},
                     outputs={"Output": [out]},
                     attrs={"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1],
                            "groups": 1, "use_cudnn": False})
    return out


def _instance_norm(fluid, d):
    L = fluid.layers
    img = d["img"]
    y = L.instance_norm(img, param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.Constant(1.5)))
    out = L.reduce_sum(y * d["img"] * d["img"])
    di, = fluid.gradients(out, [img])
    g = L.reduce_sum(L.square(di))
    return [di] + list(fluid.gradients(g, [img]))


CASES = {"activations_x": _activations_x, "activations_z": _activations_z,
         "activations_both": _activations_both, "div": _div, "mul_broadcast": _mul_broadcast,
         "conv": _conv, "instance_norm": _instance_norm}
# (no batch_norm: fluid 1.8.5's fluid.gradients of a gradient through batch_norm returns an
# empty list; spmd's is checked against finite differences in tests/unit/test_double_grad.py)

# (initial i, initial x, loop bound, body): Paddle's test is (1, 1, 11, "square")
WHILE_CASES = {"square_11": (1.0, 1.0, 11.0, "square"), "square_4": (1.0, 1.0, 4.0, "square"),
               "product_4": (1.0, 2.0, 4.0, "product")}


def build_while(fluid, i0_bound, body_kind):
    """Paddle's TestApiWhileLoop_Backward program; body "square" is its x = i * i, "product"
    x = x * i; then i = increment(i). Returns (mean, i, x)."""
    L = fluid.layers
    i = fluid.data(name="i", shape=[1], dtype="float32")
    i.stop_gradient = False
    bound = L.fill_constant(shape=[1], dtype="float32", value=i0_bound)
    x = fluid.data(name="x", shape=[1], dtype="float32")
    x.stop_gradient = False

    def cond(i, x):
        return L.less_than(i, bound)

    def body(i, x):
        x = L.elementwise_mul(x=i, y=i) if body_kind == "square" else L.elementwise_mul(x=x, y=i)
        i = L.increment(i)
        return [i, x]

    out = L.while_loop(cond, body, [i, x])
    mean = L.mean(out[1])
    fluid.backward.append_backward(mean)
    return mean, i, x


def declare(fluid, feeds):
    vs = {}
    for k, v in feeds.items():
        vs[k] = fluid.data(k, list(v.shape), str(v.dtype))
        vs[k].stop_gradient = False
    return vs


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, build in sorted(CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup), fluid.unique_name.guard():
            fetch = build(fluid, declare(fluid, FEEDS))
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        out[name] = exe.run(prog, feed=FEEDS, fetch_list=fetch, scope=scope)
    for name, (i0, x0, bound, kind) in sorted(WHILE_CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup), fluid.unique_name.guard():
            mean, i, x = build_while(fluid, bound, kind)
        exe = fluid.Executor(fluid.CPUPlace())
        feed = {"i": np.array([i0], "float32"), "x": np.array([x0], "float32")}
        out["while_" + name] = exe.run(prog, feed=feed, scope=fluid.Scope(),
                                       fetch_list=[mean.name, i.grad_name, x.grad_name])
    save("double_grad", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
