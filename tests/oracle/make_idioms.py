"""fluid 1.8's answers for the idioms of real fluid programs (BERT attention and masked-LM
gathers, YOLO upsampling, SE blocks, MobileNet depthwise convs) and for edge cases of the
creation / casting / sorting layers, for tests/unit/test_layers_idioms_oracle.py. Run with
PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_idioms.py

CASES and ERRORS have the form of make_manip.py's and run through its run_case / run_error.
"""
import os
import sys

import numpy as np

try:
    from oracle.make_manip import run_case, run_error
except ImportError:  # run as a script from the oracle's Python
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_manip import run_case, run_error

R = np.random.RandomState(13)
FEEDS = {
    "seq_b": R.uniform(-1, 1, (2, 5, 8)).astype("float32"),
    "mask_b": np.array([[[1, 1, 1, 0, 0]], [[1, 1, 1, 1, 1]]], "float32"),
    "pos": np.array([[1], [4], [7], [9]], "int64"),
    "img_b": R.uniform(-1, 1, (2, 4, 5, 6)).astype("float32"),
    "x": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "ties": np.array([[1.0, 0.5, 1.0, 0.5], [2.0, 2.0, 2.0, 1.0], [0.0, 3.0, 0.0, 3.0]],
                     "float32"),
    "i34": np.array([[3, 1, 3, 0], [2, 2, 5, 5], [1, 0, 1, 0]], "int32"),
    "neg": np.array([[-1.7, -0.5, 0.5, 1.7], [2.5, -2.5, 255.9, 300.2],
                     [0.0, -0.0, 1e-3, -1e-3]], "float32"),
    "ids32": np.array([[1], [0], [2]], "int32"),
    "img_hw": R.uniform(-1, 1, (2, 4, 6, 6)).astype("float32"),
    "tie3": R.randint(0, 4, (3, 2, 9)).astype("float32"),
    "q": R.uniform(-1, 1, (2, 1, 3, 4)).astype("float32"),
    "k": R.uniform(-1, 1, (1, 2, 4, 5)).astype("float32"),
}


def _attention(F, d):
    """BERT's multi-head self-attention over seq [N, S, 8], 2 heads, with an input mask."""
    q, k, v = (F.layers.fc(d["seq_b"], 8, num_flatten_dims=2, name=n) for n in "qkv")

    def heads(t):
        return F.layers.transpose(F.layers.reshape(t, [0, 0, 2, 4]), [0, 2, 1, 3])

    mask = F.layers.scale(F.layers.unsqueeze(d["mask_b"], [1]), 10000.0, -1.0)
    scores = F.layers.matmul(heads(q), heads(k), transpose_y=True, alpha=0.5) + mask
    probs = F.layers.dropout(F.layers.softmax(scores), 0.0,
                             dropout_implementation="upscale_in_train")
    ctx = F.layers.transpose(F.layers.matmul(probs, heads(v)), [0, 2, 1, 3])
    return [F.layers.reshape(ctx, [0, 0, 8]), scores]


def _masked_lm(F, d):
    flat = F.layers.reshape(d["seq_b"], [-1, 8])
    picked = F.layers.gather(flat, d["pos"])
    ones = F.layers.fill_constant_batch_size_like(d["seq_b"], [-1, 1], "int64", 1)
    return [picked, ones, F.layers.one_hot(d["pos"], 12)]


def _yolo_upsample(F, d):
    img = d["img_b"]
    shape = F.layers.cast(F.layers.slice(F.layers.shape(img), [0], [2], [4]), "int32")
    return [F.layers.resize_nearest(img, scale=2.0),
            F.layers.resize_nearest(img, out_shape=shape * 2),
            F.layers.resize_nearest(img, [10, 12], actual_shape=shape * 2),
            F.layers.image_resize(img, [8, 8], resample="NEAREST", align_corners=False)]


def _se_block(F, d):
    img = d["img_b"]
    pooled = F.layers.pool2d(img, pool_type="avg", global_pooling=True)
    squeeze = F.layers.fc(pooled, 2, act="relu")
    excite = F.layers.fc(squeeze, 4, act="sigmoid")
    return [F.layers.elementwise_mul(img, excite, axis=0),
            F.layers.conv2d(img, 4, 3, padding=1, groups=4, use_cudnn=False, act="relu6")]


def _out_args(F, d):
    """The layers that write into a given variable (cond=, output=, out=)."""
    x = d["x"]
    cond = F.layers.create_tensor("bool")
    lt = F.layers.less_than(x, F.layers.fill_constant([1], "float32", 0.0), cond=cond)
    target = F.layers.create_tensor("float32")
    copied = F.layers.assign(x * 3.0, output=target)
    total = F.layers.create_tensor("float32")
    summed = F.layers.sums([x, x * 2.0], out=total)
    eq = F.layers.equal(x, x, cond=F.layers.create_tensor("bool"))
    return [lt, cond, copied, target, summed, total, eq]


def _listed_shapes(F, d):
    """Shapes and bounds given as lists mixing ints and [1] Variables: the int entries stay
    known statically."""
    x, v = d["seq_b"], F.layers.fill_constant([1], "int32", 1)
    return [F.layers.slice(x, [1, 2], [v, 0], [5, 4]), F.layers.slice(x, [0, 2], [0, 2], [1, 6]),
            F.layers.expand(x, [v, 1, 2]), F.layers.reshape(x, [v, -1]),
            F.layers.reshape(x, [F.layers.fill_constant([1], "int32", 2), 0, 8]),
            F.layers.reshape(x, [v, 0, -1]), F.layers.fill_constant([v, 3], "float32", 1.0),
            F.layers.crop_tensor(x, [v, 2, 3]), F.layers.resize_bilinear(
                F.layers.reshape(x, [-1, 5, 2, 4]), [v, 3]),
            F.layers.strided_slice(x, [1, 2], [v, 0], [5, 8], [2, 3])]


def _unknown_hw(F, d):
    """Layers over an image of unknown height and width: what their static shapes say."""
    x, L = d["img_hw"], F.layers
    return [L.conv2d(x, 2, 3, padding="SAME", stride=2), L.conv2d(x, 2, 3),
            L.conv2d_transpose(x, 2, filter_size=3, stride=2), L.pool2d(x, 2, "max", 2,
                                                                      ceil_mode=True),
            L.pool2d(x, global_pooling=True), L.adaptive_pool2d(x, 3),
            L.resize_bilinear(x, scale=2.0), L.resize_nearest(x, [3, 3]), L.pixel_shuffle(x, 2),
            L.flatten(x, 2), L.reshape(x, [0, 0, -1]), L.transpose(x, [0, 2, 3, 1]),
            L.concat([x, x], 2), L.sums(L.split(x, 2, 1)), L.slice(x, [2], [1], [3]),
            L.pad2d(x, [1, 1, 1, 1]), L.crop_tensor(x, [-1, 2, 2, 3]),
            L.reduce_mean(x, [2, 3]), L.l2_normalize(x, 2)]


CASES = {
    "unknown_hw": (["img_hw"], _unknown_hw, True),
    "listed_shapes": (["seq_b"], _listed_shapes, False),
    "out_args": (["x"], _out_args, False),
    # no gradient: fluid 1.8's unstack_grad fails when some outputs are unused
    # (test_layers_idioms_oracle.py checks spmd's)
    "unstack_partial": (["x"], lambda F, d: [F.layers.unstack(d["x"], 0, 3)[2]], False),
    "misc_manip": (["x", "seq_b"], lambda F, d: [
        F.layers.concat([d["x"]]), F.layers.cast(d["x"], "float32"),
        F.layers.strided_slice(d["seq_b"], [1, 2], [F.layers.fill_constant([1], "int32", 1), 0],
                               [5, 8], [2, 3]),
        F.layers.slice(d["seq_b"], [1], F.layers.assign(np.array([1], "int32")),
                       F.layers.assign(np.array([-1], "int32"))),
        F.layers.gather(d["x"], F.layers.where(F.layers.greater_than(
            F.layers.reduce_sum(d["x"], 1), F.layers.fill_constant([1], "float32", -10.0)))),
        F.layers.crop(d["x"], F.layers.fill_constant([2, 3], "float32", 0.0), [1, 1])]
        + F.layers.split(d["seq_b"], [2, 3], 1)
        + F.layers.split(d["seq_b"], 2, 0), True),
    "bert_attention": (["seq_b", "mask_b"], _attention, True),
    "bert_masked_lm": (["seq_b", "pos"], _masked_lm, True),
    "yolo_upsample": (["img_b"], _yolo_upsample, True),
    "se_block": (["img_b"], _se_block, True),
    "argsort_ties": (["ties", "i34"], lambda F, d: list(F.layers.argsort(d["ties"], 1))
                     + list(F.layers.argsort(d["ties"], 0, descending=True))
                     + list(F.layers.argsort(d["i34"], 1, descending=True))
                     + list(F.layers.topk(d["ties"], 2)), False),
    # equal values: fluid's CPU top_k orders them as its heap-based partial sort leaves them
    "topk_ties": (["tie3"], lambda F, d: [t for k in (1, 2, 4, 8, 9)
                                          for t in F.layers.topk(d["tie3"], k)], False),
    "argmax_ties": (["ties", "i34"], lambda F, d: [
        F.layers.argmax(d["ties"], 1), F.layers.argmin(d["ties"], 0),
        F.layers.argmax(d["i34"], 0)], False),
    "cast_edges": (["neg", "i34"], lambda F, d: [
        F.layers.cast(d["neg"], "int32"), F.layers.cast(d["neg"], "int64"),
        F.layers.cast(d["neg"], "bool"), F.layers.cast(F.layers.cast(d["neg"], "bool"),
                                                       "float32"),
        F.layers.cast(d["i34"], "bool")], False),
    "fill_edges": (["x"], lambda F, d: [
        F.layers.fill_constant([2], "int64", 1.7), F.layers.fill_constant([2], "int32", -2.5),
        F.layers.fill_constant([1, 2], "float16", 0.1),
        F.layers.fill_constant_batch_size_like(d["x"], [-1, 2], "int64", 2.9),
        F.layers.zeros_like(F.layers.cast(d["x"], "int32")),
        F.layers.ones_like(F.layers.cast(d["x"], "int64"))], False),
    "range_edges": ([], lambda F, d: [
        F.layers.range(0, 0.3, 0.1, "float32"), F.layers.range(0.0, 1.0, 0.1, "float64"),
        F.layers.range(10, 0, -3, "int32"), F.layers.range(1, 2, 5, "int64"),
        F.layers.linspace(-1.0, 1.0, 5, "float64"),
        F.layers.range(F.layers.fill_constant([1], "float32", 1.0), 4.0, 1.0, "float32")],
        False),
    "tensor_args": (["x", "ids32"], lambda F, d: list(F.layers.topk(
        d["x"], F.layers.fill_constant([1], "int32", 2))) + [
        F.layers.one_hot(d["ids32"], 3),
        F.layers.one_hot(d["ids32"], F.layers.fill_constant([1], "int32", 4)),
        F.layers.expand(d["x"], F.layers.assign(np.array([1, 2], "int32"))),
        F.layers.crop_tensor(d["x"], [2, F.layers.fill_constant([1], "int32", 3)], [1, 0]),
        F.layers.crop_tensor(d["x"], F.layers.assign(np.array([2, 2], "int32")),
                             [F.layers.fill_constant([1], "int32", 1), 1]),
        F.layers.pad2d(F.layers.unsqueeze(d["x"], [0, 1]), F.layers.assign(
            np.array([1, 0, 0, 2], "int32")), mode="reflect")], False),
    "unsqueeze_order": (["x"], lambda F, d: [
        F.layers.unsqueeze(d["x"], [0, -1]), F.layers.unsqueeze(d["x"], [-1, 0]),
        F.layers.unsqueeze(d["x"], [2, 0, 1])], True),
    "int_manip": (["i34"], lambda F, d: [
        F.layers.concat([d["i34"], d["i34"]], 1), F.layers.pad(d["i34"], [1, 0, 0, 1], 7),
        F.layers.reshape(d["i34"], [-1]), F.layers.transpose(d["i34"], [1, 0]),
        F.layers.stack([d["i34"], d["i34"]], -1), F.layers.gather(d["i34"], F.layers.assign(
            np.array([2, 2], "int64")))] + F.layers.split(d["i34"], 2, 1)
        + list(F.layers.unique(F.layers.reshape(d["i34"], [-1]))), False),
}

ERRORS = {
    "embedding_int32_ids": (["ids32"], lambda F, d: [F.layers.embedding(d["ids32"], [3, 2])]),
    "matmul_bad_broadcast": (["q"], lambda F, d: [F.layers.matmul(d["q"], F.layers.fill_constant(
        [3, 4, 2], "float32", 1.0))]),
    "reshape_zero_past_rank": (["x"], lambda F, d: [F.layers.reshape(d["x"], [0, 0, 0])]),
    "pool2d_size0_not_global": (["img_b"], lambda F, d: [F.layers.pool2d(d["img_b"], 0)]),
    # fluid 1.8 runs these: see test_layers_idioms_oracle.py
    "matmul_batch_broadcast": (["q", "k"], lambda F, d: [F.layers.matmul(d["q"], d["k"])]),
    "linspace_int": ([], lambda F, d: [F.layers.linspace(0, 10, 4, "int32")]),
    "crop_tensor_offsets_var": (["x"], lambda F, d: [F.layers.crop_tensor(
        d["x"], [2, 2], F.layers.assign(np.array([1, 0], "int32")))]),
    "range_zero_step": ([], lambda F, d: [F.layers.range(0, 3, 0, "int32")]),
}


def persistable_names(fluid):
    """The names fluid gives unnamed global variables and parameters (checkpoints use them)."""
    prog = fluid.Program()
    with fluid.unique_name.guard():
        with fluid.program_guard(prog, fluid.Program()):
            fluid.layers.create_global_var([1], 0.0, "float32", persistable=True)
            fluid.layers.create_global_var([2], 1.0, "int64", persistable=True)
            fluid.layers.create_parameter([2, 3], "float32")
            fluid.layers.fc(fluid.data("x", [-1, 3], "float32"), 2)
    return sorted(v.name for v in prog.list_vars() if v.persistable)


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {n: run_case(fluid, n, CASES, FEEDS) for n in sorted(CASES)}
    errors = {n: run_error(fluid, n, ERRORS, FEEDS) for n in sorted(ERRORS)}
    save("idioms", {"cases": out, "errors": errors, "names": persistable_names(fluid)},
         meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
