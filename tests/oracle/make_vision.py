"""Outputs of fluid 1.8's convolution, pooling, normalization and vision layers and of
fluid.nets on fixed inputs, for tests/unit/test_nets.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_vision.py

CASES is shared with the test: name -> (feed names, build), build(fluid, vars) returning
the Variables to fetch. After the startup program, every parameter (sorted by name) is set to
fixed values (see param_values), on fluid and on spmd alike, so random init plays no part.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(11)
FEEDS = {
    "img": R.uniform(-1, 1, (2, 4, 5, 6)).astype("float32"),
    "nhwc": R.uniform(-1, 1, (2, 5, 6, 4)).astype("float32"),
    "vol": R.uniform(-1, 1, (1, 2, 3, 4, 5)).astype("float32"),
    "ndhwc": R.uniform(-1, 1, (1, 3, 4, 5, 2)).astype("float32"),
    "seq": R.uniform(-1, 1, (2, 3, 4)).astype("float32"),
    "kv": R.uniform(-1, 1, (2, 5, 4)).astype("float32"),
    "vec": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "vec5": R.uniform(-1, 1, (3, 5)).astype("float32"),
    "ch": R.uniform(0.5, 1.5, (4,)).astype("float32"),
    "img8": R.uniform(-1, 1, (2, 8, 4, 4)).astype("float32"),
    "vid": R.uniform(-1, 1, (6, 4, 2, 3)).astype("float32"),
    "theta": R.uniform(-1, 1, (2, 2, 3)).astype("float32"),
    "grid": R.uniform(-1.2, 1.2, (2, 5, 6, 2)).astype("float32"),
    "slots": np.array([[0, 0.4, 0.2, 0.1], [0, 0.3, -0.1, 0.8], [0.9, -0.2, 0, 0.06],
                       [0.1, 0.9, -0.9, 0]], "float32"),
}


def _data_norm(F, d):
    """data_norm layers: outputs and the statistics' 'gradients' (fetched after
    append_backward, fluid 1.8 leaves scale_w@GRAD and bias@GRAD empty; those are true
    gradients, checked by finite differences in test_ops_norm.py)."""
    y1 = F.layers.data_norm(d["vec"])
    y2 = F.layers.data_norm(d["slots"], name="dn2", slot_dim=2, enable_scale_and_shift=True,
                            param_attr={"scale_w": 1.5, "bias": 0.1},
                            epsilon=1e-3)
    y3 = F.layers.data_norm(d["slots"], name="dn3", slot_dim=2, act="relu")
    y4 = F.layers.data_norm(d["vec"], name="dn4", enable_scale_and_shift=True,
                            param_attr={"scale_w": 2.0, "bias": 0.5})
    loss = F.layers.reduce_sum(y1 * y1) + F.layers.reduce_sum(y2 * y2) + F.layers.reduce_sum(
        y3 * 3.0) + F.layers.reduce_sum(y4 * y4)
    F.backward.append_backward(loss)
    block = F.default_main_program().global_block()
    params = ["dn.batch_size", "dn.batch_sum", "dn.batch_square_sum", "dn2.batch_size",
              "dn2.batch_sum", "dn2.batch_square_sum", "dn3.batch_sum", "dn3.batch_square_sum",
              "dn4.batch_size"]
    return [y1, y2, y3, y4] + [block.var(n + "@GRAD") for n in params]


def param_values(names_and_shapes):
    """Fixed positive values per parameter (positive: moving variances stay valid)."""
    out = {}
    for i, (name, shape) in enumerate(sorted(names_and_shapes)):
        out[name] = np.random.RandomState(100 + i).uniform(0.5, 1.5, shape).astype("float32")
    return out


CASES = {
    "conv2d_nhwc_groups_same": (["nhwc"], lambda F, d: [F.layers.conv2d(
        d["nhwc"], 6, 3, stride=2, padding="SAME", groups=2, data_format="NHWC",
        act="relu")]),
    "conv2d_pairs_dilation": (["img"], lambda F, d: [F.layers.conv2d(
        d["img"], 3, [2, 3], padding=[[0, 0], [0, 0], [1, 0], [2, 1]], dilation=[2, 1],
        bias_attr=False)]),
    "conv2d_depthwise": (["img"], lambda F, d: [F.layers.conv2d(
        d["img"], 8, 3, padding=1, groups=4, use_cudnn=False)]),
    "pool2d_global_size0": (["img"], lambda F, d: [
        F.layers.pool2d(d["img"], pool_size=0, pool_type="avg", global_pooling=True),
        F.layers.pool2d(d["img"], pool_size=0, pool_type="max", global_pooling=True)]),
    "pool2d_options": (["img", "nhwc"], lambda F, d: [
        F.layers.pool2d(d["img"], 3, "avg", 2, [1, 2, 1, 0], exclusive=False),
        F.layers.pool2d(d["img"], 2, "max", 2, ceil_mode=True),
        F.layers.pool2d(d["img"], 3, "avg", 2, "SAME"),
        F.layers.pool2d(d["nhwc"], 2, "avg", 1, 1, data_format="NHWC")]),
    "conv2d_transpose": (["img", "nhwc"], lambda F, d: [
        F.layers.conv2d_transpose(d["img"], 3, filter_size=3, stride=2, padding=1),
        F.layers.conv2d_transpose(d["img"], 2, output_size=[7, 9], padding=[1, 0]),
        F.layers.conv2d_transpose(d["nhwc"], 4, filter_size=2, stride=[2, 1], groups=2,
                           data_format="NHWC", act="tanh")]),
    "conv3d": (["vol", "ndhwc"], lambda F, d: [
        F.layers.conv3d(d["vol"], 2, 2, padding=1, stride=[1, 2, 2]),
        F.layers.conv3d(d["ndhwc"], 3, [1, 2, 3], data_format="NDHWC")]),
    "conv3d_transpose": (["vol"], lambda F, d: [
        F.layers.conv3d_transpose(d["vol"], 2, filter_size=2, stride=2, padding=[0, 1, 0])]),
    "pool3d": (["vol", "ndhwc"], lambda F, d: [
        F.layers.pool3d(d["vol"], 2, "max", 1, 1),
        F.layers.pool3d(d["vol"], [2, 2, 3], "avg", [1, 2, 2], ceil_mode=True, exclusive=False),
        F.layers.pool3d(d["ndhwc"], 2, "avg", 2, data_format="NDHWC")]),
    "adaptive_pool": (["img", "vol"], lambda F, d: [
        F.layers.adaptive_pool2d(d["img"], [2, 4], "avg"),
        F.layers.adaptive_pool2d(d["img"], 3, "max")] + list(
        F.layers.adaptive_pool2d(d["img"], [3, 4], "max", require_index=True)) + [
        F.layers.adaptive_pool3d(d["vol"], [2, 3, 2], "avg")]),
    "norms": (["img"], lambda F, d: [
        F.layers.group_norm(d["img"], 2, param_attr=F.ParamAttr(),
                     bias_attr=F.ParamAttr()),
        F.layers.group_norm(d["img"], 4),
        F.layers.instance_norm(d["img"]),
        F.layers.lrn(d["img"], n=3, k=1.0, alpha=0.1, beta=0.5),
        F.layers.batch_norm(d["img"], momentum=0.5),
        F.layers.inplace_abn(d["img"], act="leaky_relu", act_alpha=0.2, is_test=False)]),
    "norms_nhwc": (["nhwc"], lambda F, d: [
        F.layers.group_norm(d["nhwc"], 2, param_attr=F.ParamAttr(), data_layout="NHWC"),
        F.layers.lrn(d["nhwc"], n=5, data_format="NHWC"),
        F.layers.batch_norm(d["nhwc"], data_layout="NHWC", is_test=True)]),
    "affine_channel": (["img", "ch"], lambda F, d: [
        F.layers.affine_channel(d["img"], d["ch"], d["ch"], act="relu")]),
    "resize": (["img", "vol"], lambda F, d: [
        F.layers.image_resize(d["img"], [7, 4], align_corners=False, align_mode=0),
        F.layers.interpolate(d["img"], scale=1.5, resample="NEAREST"),
        F.layers.resize_bilinear(d["img"], [3, 9]),
        F.layers.resize_bilinear(d["img"], [8, 8], align_corners=False),
        F.layers.resize_nearest(d["img"], [8, 3], align_corners=False),
        F.layers.resize_trilinear(d["vol"], [4, 3, 6], align_corners=False, align_mode=0),
        F.layers.image_resize_short(d["img"], 8)]),
    "rearrange": (["img8", "vid", "img"], lambda F, d: [
        F.layers.pixel_shuffle(d["img8"], 2), F.layers.space_to_depth(d["img8"], 2),
        F.layers.shuffle_channel(d["img8"], 4), F.layers.temporal_shift(d["vid"], 3, 0.25),
        F.layers.unfold(d["img"], [2, 3], strides=[1, 2], paddings=[1, 0, 0, 1], dilations=1),
        F.layers.maxout(d["img8"], 2), F.layers.maxout(d["img"], 2, axis=1)]),
    "products": (["img", "img8", "vec", "vec5", "seq"], lambda F, d: [
        F.layers.fsp_matrix(d["img"], F.layers.conv2d(d["img"], 3, 1)),
        F.layers.bilinear_tensor_product(d["vec"], d["vec5"], 3, act="sigmoid"),
        F.layers.add_position_encoding(d["seq"], 0.5, 2.0)]),
    "sampling": (["img", "theta", "grid"], lambda F, d: [
        F.layers.affine_grid(d["theta"], [2, 4, 5, 6]),
        F.layers.grid_sampler(d["img"], F.layers.affine_grid(d["theta"], [2, 4, 5, 6])),
        F.layers.grid_sampler(d["img"], d["grid"])]),
    "spectral_norm": (["vec", "img"], lambda F, d: [
        F.layers.spectral_norm(d["vec"], dim=0, power_iters=3),
        F.layers.spectral_norm(d["img"], dim=1, power_iters=1, eps=1e-6)]),
    "data_norm": (["vec", "slots"], _data_norm),
    "nets_conv": (["img"], lambda F, d: [
        F.nets.simple_img_conv_pool(d["img"], 3, 3, 2, 2, act="relu", conv_padding=1),
        F.nets.img_conv_group(d["img"], [4, 3], 2, conv_act="relu",
                              conv_with_batchnorm=[True, False], pool_stride=2)]),
    "nets_seq": (["seq", "kv"], lambda F, d: [
        F.nets.glu(d["seq"], dim=-1), F.nets.glu(d["kv"], dim=-1),
        F.nets.scaled_dot_product_attention(d["seq"], d["kv"], d["kv"]),
        F.nets.scaled_dot_product_attention(d["seq"], d["kv"], d["kv"], num_heads=2)]),
}


def run_case(fluid, name):
    """Build case `name` with the given fluid module and run it: (outputs, parameter names)."""
    feeds_names, build = CASES[name]
    feeds = {k: FEEDS[k] for k in feeds_names}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard():
        with fluid.program_guard(prog, startup):
            vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
            fetch = build(fluid, vs)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    params = [(p.name, tuple(p.shape)) for p in prog.global_block().all_parameters()]
    for pname, value in param_values(params).items():
        scope.find_var(pname).get_tensor().set(value, fluid.CPUPlace())
    outs = exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)
    return [np.asarray(o) for o in outs], sorted(n for n, _ in params)


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name in sorted(CASES):
        outs, params = run_case(fluid, name)
        out[name] = {"outs": outs, "params": params}
    save("vision", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
