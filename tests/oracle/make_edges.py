"""fluid 1.8.5 on edge cases of the elementwise, reduce and normalization layers: axis
broadcasting (trailing 1s, X smaller than Y), reductions over negative / repeated / all dims
with keep_dim, integer reductions, layer_norm's begin_norm_axis, instance_norm on 2-D input,
lrn, data_norm, and gradients through some of them, for tests/unit/test_math_edges.py. Run with
PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_edges.py

CASES maps a name to build(fluid, vars) -> list of Variables to fetch; a case fluid refuses is
stored as {"error": exception class name}.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(7)
FEEDS = {
    "x3": R.uniform(-1, 1, (2, 3, 4)).astype("float32"),
    "y3": R.uniform(-1, 1, (3,)).astype("float32"),
    "y31": R.uniform(-1, 1, (3, 1)).astype("float32"),
    "y214": R.uniform(-1, 1, (2, 1, 4)).astype("float32"),
    "x214": R.uniform(-1, 1, (2, 1, 4)).astype("float32"),
    "v4": R.uniform(-1, 1, (4,)).astype("float32"),
    "m": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "mm34": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "e": np.zeros((2, 0), "float32"),  # declared [2, -1]: reductions over no elements
    "theta": R.uniform(-1.2, 1.2, (2, 2, 3)).astype("float64"),
    "img": R.uniform(-1, 1, (2, 3, 4, 5)).astype("float64"),
    "i3": R.randint(-9, 9, (2, 3, 4)).astype("int64"),
    "i32": R.randint(-9, 9, (2, 3)).astype("int32"),
    "x4": R.uniform(-1, 1, (2, 3, 2, 2)).astype("float64"),
    "dx4": R.uniform(-1, 1, (2, 3, 2, 2)).astype("float64"),
    "c2": R.uniform(-1, 1, (4, 3)).astype("float32"),
    "l4": R.uniform(-1, 1, (2, 5, 3, 3)).astype("float32"),
}


def _grad(fluid, out, wrt, dout):
    return list(fluid.gradients([out], [wrt], target_gradients=[dout]))


def _layer_norm_grad(fluid, d, axis):
    x = d["x4"]
    x.stop_gradient = False
    y = fluid.layers.layer_norm(x, begin_norm_axis=axis, param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.Constant(1.5)), bias_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Constant(0.25)))
    return [y] + _grad(fluid, y, x, d["dx4"])


def _instance_norm_grad(fluid, d):
    x = d["x4"]
    x.stop_gradient = False
    y = fluid.layers.instance_norm(x)
    return [y] + _grad(fluid, y, x, d["dx4"])


def _scale_tensor(fluid, d):
    x = d["m"]
    x.stop_gradient = False
    y = fluid.layers.scale(x, scale=fluid.layers.fill_constant([1], "float32", 2.5), bias=1.0)
    z = fluid.layers.scale(x, scale=fluid.layers.fill_constant([1], "float32", -0.5), bias=1.0,
                           bias_after_scale=False)
    loss = fluid.layers.reduce_sum(y * z)
    return [y, z] + list(fluid.gradients([loss], [x]))


def _ew_grads(fluid, d):
    """Gradients of broadcasting elementwise ops (Y along axis 1) and of reductions with ties."""
    L = fluid.layers
    x, y = L.abs(d["x3"]) + 0.5, L.abs(d["y3"]) + 0.5
    ties = L.round(d["x3"] * 2.0)  # many equal values: max/min ties
    for v in (x, y, ties):
        v.stop_gradient = False
    outs = [L.elementwise_add(x, y, axis=1), L.elementwise_sub(x, y, axis=1),
            L.elementwise_mul(x, y, axis=1), L.elementwise_div(x, y, axis=1),
            L.elementwise_pow(x, y, axis=1), L.elementwise_max(ties, ties * 0.5 + 0.5),
            L.elementwise_min(ties, ties * 0.5 + 0.5), L.reduce_max(ties, dim=1),
            L.reduce_min(ties, dim=[0, 2], keep_dim=True), L.reduce_mean(x, dim=-1),
            L.reduce_prod(x, dim=2)]
    loss = L.sum([L.reduce_sum(o * o) for o in outs])
    return list(fluid.gradients([loss], [x, y, ties]))


def _matmul_grads(fluid, d):
    """matmul over vectors, batches (one side 2-D), transposes and alpha; mul's flattening."""
    L = fluid.layers
    a, b, v = d["x3"], d["mm34"], d["v4"]
    for t in (a, b, v):
        t.stop_gradient = False
    outs = [L.matmul(a, b, transpose_y=True), L.matmul(v, v), L.matmul(a, v),
            L.matmul(v, b, transpose_y=True, alpha=0.5), L.matmul(a, a, transpose_x=True),
            L.mul(a, L.transpose(b, [1, 0]), x_num_col_dims=2)]
    loss = L.sum([L.reduce_sum(o * o) for o in outs])
    return outs + list(fluid.gradients([loss], [a, b, v]))


def _sampling(fluid, d):
    """affine_grid (list and Variable output shapes) and grid_sampler, points outside the
    input included, with gradients of both."""
    L = fluid.layers
    theta, img = d["theta"], d["img"]
    theta.stop_gradient = img.stop_gradient = False
    grid = L.affine_grid(theta, [2, 3, 4, 5])
    grid2 = L.affine_grid(theta, L.assign(np.array([2, 3, 4, 5], "int32")))
    out = L.grid_sampler(img, grid)
    loss = L.reduce_sum(out * out) + L.reduce_sum(grid2 * grid2)
    return [grid, grid2, out] + list(fluid.gradients([loss], [theta, img]))


def _refused(layer):
    return lambda F, d: [layer(F.layers, d)]


CASES = {
    "reduce_empty": lambda F, d: [
        F.layers.reduce_max(d["e"], dim=1), F.layers.reduce_min(d["e"], dim=1),
        F.layers.reduce_max(F.layers.cast(d["e"], "int32"), dim=1),
        F.layers.reduce_min(F.layers.cast(d["e"], "int64"), dim=1, keep_dim=True),
        F.layers.reduce_prod(d["e"], dim=1), F.layers.reduce_max(d["e"]),
        F.layers.reduce_mean(d["e"]), F.layers.reduce_sum(d["e"])],
    "grads": _ew_grads,
    "sampling": _sampling,
    "matmul": _matmul_grads,
    "scale_tensor": _scale_tensor,
    "pow_tensor": lambda F, d: [F.layers.pow(d["m"], F.layers.fill_constant([1], "float32", 3.0))],
    # int(factor) as the exponent, in the input's dtype (a negative factor hangs fluid)
    "pow_int": lambda F, d: [F.layers.pow(d["i32"], 2.0), F.layers.pow(d["i3"], 3.9)],
    "refuse_floordiv_float": _refused(lambda L, d: L.elementwise_floordiv(d["m"], d["m"])),
    "refuse_floordiv_float_op": _refused(lambda L, d: d["m"] // 2.0),
    "refuse_mean_int": _refused(lambda L, d: L.mean(d["i32"])),
    "refuse_matmul_int": _refused(lambda L, d: L.matmul(d["i32"], d["i32"], transpose_y=True)),
    "refuse_mul_int": _refused(lambda L, d: L.mul(d["i32"], d["i32"])),
    "refuse_clip_int": _refused(lambda L, d: L.clip(d["i32"], -1.0, 1.0)),
    "refuse_reduce_sum_bool": _refused(lambda L, d: L.reduce_sum(d["m"] > 0)),
    "refuse_elementwise_bool": _refused(lambda L, d: L.elementwise_add(d["m"] > 0, d["m"] > 0)),
    # elementwise broadcasting
    "ew_axis1": lambda F, d: [F.layers.elementwise_add(d["x3"], d["y3"], axis=1),
                              F.layers.elementwise_mul(d["x3"], d["y31"], axis=1),
                              F.layers.elementwise_sub(d["x3"], d["y214"]),
                              F.layers.elementwise_max(d["x3"], d["v4"]),
                              F.layers.elementwise_div(d["x3"], d["v4"], axis=2)],
    "ew_x_broadcast": lambda F, d: [F.layers.elementwise_add(d["x214"], d["x3"])],
    "ew_x_smaller": lambda F, d: [F.layers.elementwise_add(d["v4"], d["m"])],
    "ew_axis_neg2": lambda F, d: [F.layers.elementwise_add(d["x3"], d["y31"], axis=-2)],
    "ew_int": lambda F, d: [F.layers.elementwise_max(d["i32"], d["i32"] * 2),
                            F.layers.elementwise_min(d["i32"], d["i32"] - 3),
                            F.layers.elementwise_sub(d["i32"], d["i32"] * 3)],
    # reductions
    "reduce_dims": lambda F, d: [F.layers.reduce_sum(d["x3"], dim=[-1, 0]),
                                 F.layers.reduce_mean(d["x3"], dim=-2, keep_dim=True),
                                 F.layers.reduce_max(d["x3"], dim=[0, 1, 2]),
                                 F.layers.reduce_min(d["x3"], dim=[0, 1, 2], keep_dim=True),
                                 F.layers.reduce_prod(d["x3"], dim=[]),
                                 F.layers.reduce_sum(d["x3"], dim=[0, -1], keep_dim=True)],
    # every dim named (not dim=None): fluid 1.8.5 never writes Out (0 or stale memory)
    "reduce_every_dim_named": lambda F, d: [
        F.layers.reduce_sum(d["x3"], dim=[0, 1, 2]), F.layers.reduce_mean(d["x3"], dim=[0, 1, 2]),
        F.layers.reduce_sum(d["x3"], dim=[2, 1, 0], keep_dim=True)],
    "reduce_repeated_dim": lambda F, d: [F.layers.reduce_sum(d["m"], dim=[1, -1])],
    "reduce_int": lambda F, d: [F.layers.reduce_sum(d["i3"], dim=1),
                                F.layers.reduce_max(d["i3"], dim=-1, keep_dim=True),
                                F.layers.reduce_min(d["i3"]),
                                F.layers.reduce_prod(d["i32"], dim=0),
                                F.layers.reduce_mean(d["i3"], dim=[0, 2]),
                                F.layers.reduce_sum(d["i32"])],
    # norms
    "layer_norm_axis1": lambda F, d: _layer_norm_grad(F, d, 1),
    "layer_norm_axis3": lambda F, d: _layer_norm_grad(F, d, 3),
    "layer_norm_plain": lambda F, d: [F.layers.layer_norm(d["x3"], scale=False, shift=False,
                                                          begin_norm_axis=2)],
    "instance_norm_4d": lambda F, d: _instance_norm_grad(F, d),
    "instance_norm_2d": lambda F, d: [F.layers.instance_norm(d["c2"])],
    "lrn": lambda F, d: [F.layers.lrn(d["l4"]), F.layers.lrn(d["l4"], n=3, k=2.0, alpha=0.5,
                                                             beta=0.5)],
    "lrn_nhwc": lambda F, d: [F.layers.lrn(d["l4"], n=3, alpha=0.5, data_format="NHWC")],
    "data_norm": lambda F, d: [F.layers.data_norm(d["c2"]),
                               F.layers.data_norm(d["c2"], name="dn2", epsilon=1e-4)],
}


def names(fluid):
    """The output names of math layers given a `name` (a prefix for most, the name itself for
    clip and clip_by_norm, as in fluid 1.8.5)."""
    L = fluid.layers
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        x = fluid.data("x", [3, 4], "float32")
        i = L.cast(x, "int32")
        return [L.elementwise_add(x, x, name="a1").name,
                L.elementwise_add(x, x, act="relu", name="a2").name,
                L.scale(x, 2.0, name="s1").name, L.scale(x, 2.0, name="s2", act="relu").name,
                L.clip(x, -1.0, 1.0, name="c1").name, L.clip_by_norm(x, 1.0, name="cbn").name,
                L.elementwise_max(x, x, name="m1").name,
                L.elementwise_floordiv(i, i, name="f1").name, L.reduce_sum(x, name="r1").name]


def declare(fluid):
    return {k: fluid.data(k, [2, -1] if k == "e" else list(v.shape), str(v.dtype))
            for k, v in FEEDS.items()}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, build in sorted(CASES.items()):
        prog, startup = fluid.Program(), fluid.Program()
        try:
            with fluid.program_guard(prog, startup):
                fetch = build(fluid, declare(fluid))
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            out[name] = exe.run(prog, feed=FEEDS, fetch_list=fetch)
        except Exception as e:  # noqa: BLE001 - what fluid refuses is the answer
            out[name] = {"error": type(e).__name__}
    out["names"] = names(fluid)
    save("edges", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
