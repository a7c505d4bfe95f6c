"""fluid 1.8's forward outputs, gradients, static shapes and dtypes, and errors for the conv,
pool, resize, nn (fc, embedding, dropout, matmul, mul), random and linalg layers, for
tests/unit/test_layers_convnn_oracle.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_convnn.py

CASES and ERRORS have the form of make_manip.py's and run through its run_case / run_error
(parameters set to fixed values after the startup program). RANDOM cases are compared on
static shapes and dtypes and on the fetched shapes only: the draws differ by design.
"""
import os
import sys

import numpy as np

try:
    from oracle.make_manip import run_case, run_error
except ImportError:  # run as a script from the oracle's Python
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_manip import run_case, run_error

R = np.random.RandomState(9)
FEEDS = {
    "img": R.uniform(-1, 1, (1, 4, 7, 6)).astype("float32"),
    "nhwc": R.uniform(-1, 1, (2, 7, 6, 4)).astype("float32"),
    "vol": R.uniform(-1, 1, (1, 2, 5, 4, 6)).astype("float32"),
    "x": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "x3": R.uniform(-1, 1, (2, 3, 4)).astype("float32"),
    "w3": R.uniform(-1, 1, (2, 4, 5)).astype("float32"),
    "w": R.uniform(-1, 1, (4, 5)).astype("float32"),
    "v4": R.uniform(-1, 1, (4,)).astype("float32"),
    "ch": R.uniform(0.5, 1.5, (4,)).astype("float32"),
    "ids": np.array([[1], [0], [3], [1]], "int64"),
    "ids3": np.array([[[1], [2]], [[0], [1]]], "int64"),
    "v3": R.uniform(-1, 1, (2, 3)).astype("float32"),
}
FEEDS.update({
    "m3": R.uniform(-1, 1, (2, 3, 3)).astype("float32"),
    "c3": R.uniform(-1, 1, (4, 3)).astype("float32"),
    "off": R.uniform(-1.5, 1.5, (1, 18, 3, 6)).astype("float32"),
    "msk": R.uniform(0, 1, (1, 9, 3, 6)).astype("float32"),
    "dimg": R.uniform(-1, 1, (1, 2, 5, 6)).astype("float32"),
    "eids": np.array([[1], [3], [1], [0]], "int64"),
    "img64": R.uniform(-1, 1, (1, 2, 5, 4)).astype("float64"),
    "x64": R.uniform(-1, 1, (3, 4)).astype("float64"),
    "ties": np.array([[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 0, 0, 3], [0, 3, 3, 0]]]], "float32"),
})
FEEDS.update({k + "_b": FEEDS[k] for k in ("nhwc", "x", "x3", "vol")})  # batch dim -1
FEEDS["img_b"] = R.uniform(-1, 1, (2, 4, 7, 6)).astype("float32")


def _emb(F, d):
    a = F.layers.embedding(d["ids"], [4, 3], padding_idx=1)
    b = F.layers.embedding(d["ids3"], [5, 2], padding_idx=-1, param_attr="e2")
    c = F.layers.embedding(d["ids"], [4, 3], param_attr="e3")
    loss = F.layers.reduce_sum(a * a) + F.layers.reduce_sum(b * b) + F.layers.reduce_sum(c * c)
    F.backward.append_backward(loss)
    block = F.default_main_program().global_block()
    names = sorted(p.name for p in block.all_parameters())
    return [a, b, c] + [block.var(n + "@GRAD") for n in names]


def _sparse_embedding_sgd(F, d):
    """An is_sparse embedding trained one SGD step: the table after it (and a dense one)."""
    outs = []
    for sparse in (True, False):
        e = F.layers.embedding(d["eids"], [5, 3], is_sparse=sparse, padding_idx=0,
                               param_attr="emb_sparse" if sparse else "emb_dense")
        outs.append(F.layers.reduce_sum(e * e))
    F.optimizer.SGD(0.5).minimize(outs[0] + outs[1])
    block = F.default_main_program().global_block()
    return outs + [block.var("emb_sparse"), block.var("emb_dense")]


def _word2vec(F, d):
    """The book's word2vec: four lookups in one shared sparse table, concat, fc, softmax,
    one SGD step; the loss and the shared table after it."""
    embs = [F.layers.embedding(F.layers.slice(d["eids"], [0], [i], [i + 3]), [5, 3],
                               is_sparse=True, param_attr="shared_w") for i in range(2)]
    hidden = F.layers.fc(F.layers.concat(embs, 1), 4, act="sigmoid")
    pred = F.layers.fc(hidden, 5, act="softmax")
    loss = F.layers.mean(F.layers.cross_entropy(pred, F.layers.slice(d["eids"], [0], [1],
                                                                       [4])))
    F.optimizer.SGD(0.5).minimize(loss)
    return [loss, F.default_main_program().global_block().var("shared_w")]


def _fc(F, d):
    a = F.layers.fc(d["x3"], 2, num_flatten_dims=2, act="tanh")
    b = F.layers.fc(d["x3"], 3)
    c = F.layers.fc([d["x"], d["x"] * 2.0], 2, bias_attr=False)
    loss = F.layers.reduce_sum(a * a) + F.layers.reduce_sum(b * b) + F.layers.reduce_sum(c * c)
    F.backward.append_backward(loss)
    block = F.default_main_program().global_block()
    names = sorted(p.name for p in block.all_parameters())
    return [a, b, c] + [block.var(n + "@GRAD") for n in names]


CASES = {
    "conv2d_padding_modes": (["img"], lambda F, d: [
        F.layers.conv2d(d["img"], 4, 3, stride=2, padding="SAME"),
        F.layers.conv2d(d["img"], 2, [3, 2], stride=[2, 3], padding="VALID", dilation=[1, 2]),
        F.layers.conv2d(d["img"], 2, 3, padding=[1, 2]),
        F.layers.conv2d(d["img"], 2, 3, padding=[1, 0, 2, 1], dilation=2),
        F.layers.conv2d(d["img"], 4, 1, groups=4, bias_attr=False, act="relu")], True),
    "conv2d_nhwc": (["nhwc"], lambda F, d: [
        F.layers.conv2d(d["nhwc"], 4, 3, stride=2, padding="SAME", groups=2,
                        data_format="NHWC"),
        F.layers.conv2d(d["nhwc"], 3, 2, padding=[[0, 0], [1, 1], [0, 1], [0, 0]],
                        data_format="NHWC")], True),
    "conv2d_transpose": (["img"], lambda F, d: [
        F.layers.conv2d_transpose(d["img"], 2, output_size=[15, 13], stride=2),
        F.layers.conv2d_transpose(d["img"], 2, output_size=[14, 12], filter_size=3, stride=2,
                                  padding=1),
        F.layers.conv2d_transpose(d["img"], 4, filter_size=[3, 2], stride=[1, 2], dilation=2,
                                  groups=2, padding="SAME"),
        F.layers.conv2d_transpose(d["img"], 2, filter_size=2, padding="VALID", stride=2)],
        True),
    "conv3d": (["vol"], lambda F, d: [
        F.layers.conv3d(d["vol"], 2, 3, padding="SAME", stride=2),
        F.layers.conv3d(d["vol"], 4, [2, 1, 3], groups=2, dilation=[1, 2, 1]),
        F.layers.conv3d_transpose(d["vol"], 2, output_size=[10, 8, 12], stride=2)], True),
    "pool2d": (["img"], lambda F, d: [
        F.layers.pool2d(d["img"], 3, "max", 2, 1, ceil_mode=True),
        F.layers.pool2d(d["img"], 3, "avg", 2, 1, ceil_mode=True),
        F.layers.pool2d(d["img"], 3, "avg", 2, 1, ceil_mode=True, exclusive=False),
        F.layers.pool2d(d["img"], [2, 3], "avg", [2, 1], "VALID"),
        F.layers.pool2d(d["img"], 2, "max", 2, "SAME"),
        F.layers.pool2d(d["img"], pool_type="avg", global_pooling=True),
        F.layers.pool2d(d["img"], 0, "max", global_pooling=True),
        F.layers.pool2d(d["img"], 2, "max", 1, [[0, 0], [0, 0], [1, 0], [0, 1]])], True),
    "pool2d_nhwc_adaptive": (["nhwc", "img"], lambda F, d: [
        F.layers.pool2d(d["nhwc"], 3, "avg", 2, 1, data_format="NHWC"),
        F.layers.pool2d(d["nhwc"], 2, "max", global_pooling=True, data_format="NHWC"),
        F.layers.adaptive_pool2d(d["img"], [3, 4], "avg"),
        F.layers.adaptive_pool2d(d["img"], 4, "max"),
        F.layers.adaptive_pool2d(d["img"], 1, "avg")], True),
    "pool3d": (["vol"], lambda F, d: [
        F.layers.pool3d(d["vol"], 2, "max", 2, 0, ceil_mode=True),
        F.layers.pool3d(d["vol"], 3, "avg", 2, 1, exclusive=True),
        F.layers.pool3d(d["vol"], 0, "avg", global_pooling=True),
        F.layers.adaptive_pool3d(d["vol"], [2, 2, 3], "max")], True),
    "resize": (["img"], lambda F, d: [
        F.layers.resize_bilinear(d["img"], [10, 9]),
        F.layers.resize_bilinear(d["img"], [5, 4], align_corners=False),
        F.layers.resize_bilinear(d["img"], [9, 11], align_corners=False, align_mode=0),
        F.layers.resize_nearest(d["img"], [11, 9]),
        F.layers.resize_nearest(d["img"], [4, 5], align_corners=False),
        F.layers.resize_bilinear(d["img"], scale=2.0),
        F.layers.resize_nearest(d["img"], scale=0.5),
        F.layers.image_resize(d["img"], [3, 3], resample="NEAREST")], True),
    "resize_tensor_shape": (["img"], lambda F, d: [
        F.layers.resize_bilinear(d["img"], F.layers.assign(np.array([8, 5], "int32"))),
        F.layers.resize_nearest(d["img"], [F.layers.fill_constant([1], "int32", 3), 4]),
        F.layers.resize_bilinear(d["img"], out_shape=[6, 6], scale=3.0)], True),
    "resize_trilinear": (["vol"], lambda F, d: [
        F.layers.resize_trilinear(d["vol"], [7, 3, 8]),
        F.layers.resize_trilinear(d["vol"], [3, 6, 5], align_corners=False, align_mode=1),
        F.layers.resize_trilinear(d["vol"], scale=1.5, align_corners=False, align_mode=0)],
        True),
    "pixel_affine": (["img", "ch"], lambda F, d: [
        F.layers.pixel_shuffle(d["img"], 2),
        F.layers.affine_channel(d["img"], d["ch"], d["ch"] * 0.5)], True),
    "fc": (["x", "x3"], _fc, False),
    "embedding": (["ids", "ids3"], _emb, False),
    # no gradient: fluid 1.8 refuses a backward pass through an is_test dropout
    "dropout_test": (["x3"], lambda F, d: [
        F.layers.dropout(d["x3"], 0.3, is_test=True),
        F.layers.dropout(d["x3"], 0.3, is_test=True, dropout_implementation="upscale_in_train"),
        F.layers.dropout(d["x3"], 1.0, is_test=True),
        F.layers.dropout(d["x3"], 1.0, is_test=True, dropout_implementation="upscale_in_train")],
        False),
    "dropout_extremes": (["x3"], lambda F, d: [
        F.layers.dropout(d["x3"], 0.0),
        F.layers.dropout(d["x3"], 0.0, dropout_implementation="upscale_in_train"),
        F.layers.dropout(d["x3"], 1.0)], True),
    "matmul": (["x3", "w3", "w", "x", "v4"], lambda F, d: [
        F.layers.matmul(d["x3"], d["w3"], alpha=0.5),
        F.layers.matmul(d["x3"], d["w"]),
        F.layers.matmul(d["w3"], d["x3"], transpose_x=True, transpose_y=True),
        F.layers.matmul(d["x"], d["x"], transpose_y=True),
        F.layers.matmul(d["x"], d["v4"]), F.layers.matmul(d["v4"], d["v4"]),
        F.layers.matmul(d["v4"], d["w"])], True),
    "mul": (["x3", "w", "x"], lambda F, d: [
        F.layers.mul(d["x3"], d["w"], x_num_col_dims=2),
        F.layers.mul(d["x3"], F.layers.reshape(F.layers.concat([d["w"], d["w"], d["w"]]),
                                               [12, 5])),
        F.layers.mul(d["x"], F.layers.reshape(d["w"], [4, 5, 1]),
                     y_num_col_dims=1)], True),
    "batch_unknown": (["img_b", "nhwc_b", "x_b", "x3_b", "vol_b", "w"], lambda F, d: [
        F.layers.conv2d(d["img_b"], 3, 3, padding="SAME", stride=2),
        F.layers.conv2d(d["nhwc_b"], 2, 2, data_format="NHWC"),
        F.layers.conv2d_transpose(d["img_b"], 2, output_size=[14, 12], stride=2),
        F.layers.conv2d_transpose(d["img_b"], 2, filter_size=3),
        F.layers.pool2d(d["img_b"], 2, "max", 2, ceil_mode=True),
        F.layers.pool2d(d["img_b"], global_pooling=True, pool_type="avg"),
        F.layers.adaptive_pool2d(d["img_b"], [2, 3]),
        F.layers.pool3d(d["vol_b"], 2, "avg", 2),
        F.layers.resize_bilinear(d["img_b"], [5, 5]), F.layers.resize_nearest(
            d["img_b"], scale=2.0), F.layers.pixel_shuffle(d["img_b"], 2),
        F.layers.fc(d["x3_b"], 2, num_flatten_dims=2), F.layers.fc(d["img_b"], 3),
        F.layers.matmul(d["x3_b"], d["w"]), F.layers.matmul(d["x_b"], d["x_b"], False, True),
        F.layers.mul(d["x_b"], d["w"]),
        F.layers.l2_normalize(d["x_b"], 1)], True),
    # max pooling over equal values: the gradient goes to the first maximum of each window
    "maxpool_ties": (["ties"], lambda F, d: [
        F.layers.pool2d(d["ties"], 2, "max", 2), F.layers.pool2d(d["ties"], 3, "max", 1, 1),
        F.layers.adaptive_pool2d(d["ties"], 3, "max"),
        F.layers.pool2d(d["ties"], 0, "max", global_pooling=True),
        F.layers.pool2d(d["ties"], 2, "max", 1, ceil_mode=True),
        F.layers.pool3d(F.layers.unsqueeze(d["ties"], [2]), [1, 2, 2], "max", [1, 2, 2])],
        True),
    "float64": (["img64", "x64"], lambda F, d: [
        F.layers.conv2d(d["img64"], 2, 3, padding=1), F.layers.pool2d(d["img64"], 2, "avg", 2),
        F.layers.resize_bilinear(d["img64"], [7, 3]), F.layers.fc(d["x64"], 2),
        F.layers.conv2d_transpose(d["img64"], 2, filter_size=2),
        F.layers.matmul(d["x64"], d["x64"], transpose_y=True),
        F.layers.pixel_shuffle(F.layers.concat([d["img64"], d["img64"]], 1), 2),
        F.layers.l2_normalize(d["x64"], 1), F.layers.dropout(d["x64"], 0.0)],
        True),
    "embedding_sparse_sgd": (["eids"], _sparse_embedding_sgd, False),
    "word2vec": (["eids"], _word2vec, False),
    # ceil_mode adds a last window that starts past the input: fluid's exclusive average
    # divides by 0 there (test_layers_convnn_oracle.py)
    "pool_empty_window": (["img", "nhwc"], lambda F, d: [
        F.layers.pool2d(d["img"], 1, "avg", [1, 2], "SAME", ceil_mode=True),
        F.layers.pool2d(d["nhwc"], [3, 1], "avg", [1, 2], [1, 0, 0, 0], ceil_mode=True,
                        data_format="NHWC"),
        F.layers.pool2d(d["img"], 1, "max", [1, 2], "SAME", ceil_mode=True),
        F.layers.pool2d(d["img"], 1, "avg", [1, 2], "SAME", ceil_mode=True, exclusive=False)],
        False),
    "resize_edges": (["img", "nhwc"], lambda F, d: [
        F.layers.resize_bilinear(d["img"], [1, 1]),
        F.layers.resize_bilinear(d["img"], [1, 5], align_corners=False, align_mode=0),
        F.layers.resize_nearest(d["img"], [1, 1]),
        F.layers.resize_bilinear(F.layers.slice(d["img"], [2, 3], [0, 0], [1, 1]), [3, 4]),
        F.layers.resize_nearest(F.layers.slice(d["img"], [2], [0], [1]), [2, 5],
                                align_corners=False),
        F.layers.resize_trilinear(F.layers.unsqueeze(d["img"], [2]), [1, 3, 3]),
        F.layers.pad2d(d["nhwc"], [1, 0, 2, 1], mode="reflect", data_format="NHWC"),
        F.layers.pad2d(d["nhwc"], [0, 1, 1, 0], mode="edge", data_format="NHWC")], True),
    "linalg_paddle2": (["m3", "x", "c3", "v4", "w"], lambda F, d: [
        F.layers.bmm(d["m3"], d["m3"]), F.layers.dot(d["x"], d["x"] * 2.0),
        F.layers.cross(d["c3"], d["c3"] * d["c3"], dim=1), F.layers.cross(d["m3"], d["m3"] + 1.0),
        F.layers.dist(d["x"], d["x"] * 0.5, p=2), F.layers.dist(d["x"], d["v4"], p=1),
        F.layers.dist(d["x"], d["x"] * 0.5, p=float("inf")),
        F.layers.kron(d["x"], d["c3"]), F.layers.trace(d["m3"], offset=1, dim1=1, dim2=2),
        F.layers.t(d["x"]), F.layers.t(d["v4"]),
        F.layers.addmm(F.layers.fill_constant([4, 4], "float32", 0.5), d["c3"],
                       F.layers.t(d["c3"]), alpha=2.0, beta=0.5)], True),
    # im2col_step=1: at its default (64) fluid 1.8's CPU kernel gives zeros for a batch below
    # 64; spmd ignores im2col_step (test_layers_convnn_oracle.py)
    "deformable_conv": (["dimg", "off", "msk"], lambda F, d: [
        F.layers.deformable_conv(d["dimg"], d["off"], d["msk"], 3, 3, padding=[0, 1],
                                 im2col_step=1),
        F.layers.deformable_conv(d["dimg"], d["off"], None, 2, 3, padding=[0, 1],
                                 modulated=False, bias_attr=False, im2col_step=1)], True),
    "deformable_conv_default_step": (["dimg", "off", "msk"], lambda F, d: [
        F.layers.deformable_conv(d["dimg"], d["off"], d["msk"], 3, 3, padding=[0, 1],
                                 bias_attr=False)], False),
    "vision_extra": (["img", "nhwc"], lambda F, d: [
        F.layers.resize_bilinear(d["img"], scale=1.7, align_corners=False, align_mode=0),
        F.layers.resize_nearest(d["img"], scale=0.6),
        F.layers.resize_bilinear(d["nhwc"], [4, 9], data_format="NHWC"),
        F.layers.resize_nearest(d["nhwc"], [9, 4], align_corners=False, data_format="NHWC"),
        F.layers.image_resize_short(d["img"], 5, resample="NEAREST"),
        F.layers.space_to_depth(F.layers.slice(d["img"], [2], [0], [6]), 2),
        F.layers.affine_channel(d["nhwc"], F.layers.fill_constant([4], "float32", 2.0),
                                F.layers.fill_constant([4], "float32", 0.5),
                                data_layout="NHWC")], True),
    "conv_extra": (["img", "nhwc", "vol"], lambda F, d: [
        F.layers.conv2d(d["img"], 2, 3, stride=2, padding="SAME", dilation=2),
        F.layers.conv2d_transpose(d["img"], 2, output_size=[15, 14], filter_size=3, stride=2),
        F.layers.conv2d_transpose(d["nhwc"], 2, filter_size=3, stride=2, padding="SAME",
                                  data_format="NHWC"),
        F.layers.conv3d_transpose(F.layers.transpose(d["vol"], [0, 2, 3, 4, 1]), 2, filter_size=2,
                                  data_format="NDHWC"),
        F.layers.pool2d(d["img"], 3, "avg", 2, "SAME", ceil_mode=True, exclusive=False),
        F.layers.pool2d(d["nhwc"], 3, "max", 2, 1, ceil_mode=True, data_format="NHWC")]
        + [F.layers.adaptive_pool3d(d["vol"], [2, 3, 2], "max", require_index=True)[0]], True),
    "adaptive_index": (["vol", "img"], lambda F, d: list(F.layers.adaptive_pool3d(
        d["vol"], [2, 3, 2], "max", require_index=True)) + list(F.layers.adaptive_pool2d(
            d["img"], [3, 4], "max", require_index=True)), False),
    "linalg": (["x", "x3", "w3", "v3"], lambda F, d: [
        F.layers.l2_normalize(d["x"], axis=1), F.layers.l2_normalize(d["x3"], axis=-1),
        F.layers.cos_sim(d["x"], d["x"] * 2.0 + 0.1),
        F.layers.cos_sim(d["x"], F.layers.slice(d["x"], [0], [0], [1]))], True),
}

RANDOM = {
    "random": ([], lambda F, d: [
        F.layers.uniform_random([2, 3]), F.layers.uniform_random([4], "float64", -2.0, -1.0),
        F.layers.gaussian_random([3, 2], 1.0, 0.5), F.layers.gaussian_random([5], dtype="float64"),
        F.layers.uniform_random([F.layers.fill_constant([1], "int64", 3), 2], seed=3),
        F.layers.uniform_random(F.layers.assign(np.array([2, 5], "int32")))], False),
    "random_like": (["x3"], lambda F, d: [
        F.layers.uniform_random_batch_size_like(d["x3"], [-1, 7]),
        F.layers.gaussian_random_batch_size_like(d["x3"], [1, -1], input_dim_idx=2,
                                                 output_dim_idx=1),
        F.layers.dropout(d["x3"], 0.5), F.layers.dropout(
            d["x3"], 0.5, dropout_implementation="upscale_in_train")], False),
}

ERRORS = {
    "conv2d_groups_not_dividing": (["img"], lambda F, d: [F.layers.conv2d(d["img"], 3, 3,
                                                                           groups=3)]),
    "conv2d_bad_padding_str": (["img"], lambda F, d: [F.layers.conv2d(d["img"], 2, 3,
                                                                       padding="FULL")]),
    "conv2d_rank3": (["x3"], lambda F, d: [F.layers.conv2d(d["x3"], 2, 3)]),
    "conv2d_kernel_too_big": (["img"], lambda F, d: [F.layers.conv2d(d["img"], 2, 9)]),
    "pool2d_bad_type": (["img"], lambda F, d: [F.layers.pool2d(d["img"], 2, "sum")]),
    "pool2d_too_big": (["img"], lambda F, d: [F.layers.pool2d(d["img"], 9)]),
    "pool2d_bad_format": (["img"], lambda F, d: [F.layers.pool2d(d["img"], 2,
                                                                  data_format="NCWH")]),
    "conv2d_transpose_no_size": (["img"], lambda F, d: [F.layers.conv2d_transpose(d["img"],
                                                                                    2)]),
    "conv2d_transpose_bad_output": (["img"], lambda F, d: [F.layers.conv2d_transpose(
        d["img"], 2, output_size=[30, 30], filter_size=3, stride=2)]),
    "resize_no_shape": (["img"], lambda F, d: [F.layers.resize_bilinear(d["img"])]),
    "resize_bad_rank": (["x3"], lambda F, d: [F.layers.resize_bilinear(d["x3"], [4, 4])]),
    "resize_bad_mode": (["img"], lambda F, d: [F.layers.image_resize(d["img"], [4, 4],
                                                                      resample="CUBIC")]),
    "pixel_shuffle_not_divisible": (["img"], lambda F, d: [F.layers.pixel_shuffle(d["img"],
                                                                                   3)]),
    "fc_bad_flatten": (["x"], lambda F, d: [F.layers.fc(d["x"], 2, num_flatten_dims=2)]),
    "dropout_bad_prob": (["x"], lambda F, d: [F.layers.dropout(d["x"], 1.5)]),
    "dropout_bad_impl": (["x"], lambda F, d: [F.layers.dropout(
        d["x"], 0.5, dropout_implementation="scale")]),
    "embedding_padding_out_of_range": (["ids"], lambda F, d: [F.layers.embedding(
        d["ids"], [4, 3], padding_idx=4)]),
    "embedding_id_out_of_range": (["ids"], lambda F, d: [F.layers.embedding(d["ids"], [3, 2])]),
    "matmul_mismatch": (["x"], lambda F, d: [F.layers.matmul(d["x"], d["x"])]),
    "mul_flatten_mismatch": (["x3", "w"], lambda F, d: [F.layers.mul(
        d["x3"], F.layers.reshape(d["w"], [2, 10]))]),
    "mul_mismatch": (["x"], lambda F, d: [F.layers.mul(d["x"], d["x"])]),
}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {n: run_case(fluid, n, CASES, FEEDS) for n in sorted(CASES)}
    rand = {}
    for n in sorted(RANDOM):
        res = run_case(fluid, n, RANDOM, FEEDS)
        rand[n] = {"shapes": res["shapes"], "dtypes": res["dtypes"],
                   "out_shapes": [list(o.shape) for o in res["outs"]]}
    errors = {n: run_error(fluid, n, ERRORS, FEEDS) for n in sorted(ERRORS)}
    save("convnn", {"cases": out, "random": rand, "errors": errors},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
