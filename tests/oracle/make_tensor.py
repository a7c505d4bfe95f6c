"""Outputs of fluid 1.8's tensor creation / manipulation / indexing layers on fixed inputs,
for tests/unit/test_layers_tensor.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_tensor.py

CASES is shared with the test: each entry is (feeds, build), where build(layers, vars)
returns the list of Variables to fetch; the test runs the same build with spmd.fluid.layers.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(7)
X34 = R.uniform(-1, 1, (3, 4)).astype("float32")
X234 = R.uniform(-1, 1, (2, 3, 4)).astype("float32")
IMG = R.uniform(-1, 1, (1, 2, 3, 3)).astype("float32")
V6 = np.array([3.0, -1.0, 2.5, 7.0, 0.0, -4.0], "float32")
IDS = np.array([[1], [5], [6], [3]], "int64")
U = np.array([2, 3, 3, 1, 5, 3], "int64")


def _f(name):
    return {"x": {"x": X34}, "x3": {"x": X234}, "img": {"x": IMG}, "v": {"v": V6},
            "ids": {"ids": IDS}, "u": {"u": U}, "none": {}}[name]


def _hash(L, ids):
    """fluid 1.8's hash layer rejects every int hash_size (its type check is broken), so on
    the oracle the op is appended directly with the attributes the layer would set."""
    if not L.__name__.startswith("paddle"):
        return L.hash(ids, 1000, num_hash=3)
    from paddle.fluid.layer_helper import LayerHelper

    helper = LayerHelper("hash")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(type="hash", inputs={"X": ids}, outputs={"Out": out},
                     attrs={"num_hash": 3, "mod_by": 1000})
    return out


CASES = {
    "arange": ("none", lambda L, d: [L.arange(0, 7, 2, dtype="int64"), L.arange(1.0, 2.0, 0.3)]),
    "range": ("none", lambda L, d: [L.range(10, 1, -3, "int32")]),
    "linspace": ("none", lambda L, d: [L.linspace(0, 1, 5, "float32")]),
    "argmax": ("x", lambda L, d: [L.argmax(d["x"], axis=1), L.argmax(d["x"], axis=0)]),
    "argmin": ("x", lambda L, d: [L.argmin(d["x"], axis=-1)]),
    "argsort": ("x", lambda L, d: list(L.argsort(d["x"], axis=1))
                + list(L.argsort(d["x"], axis=0, descending=True))),
    "diag": ("none", lambda L, d: [L.diag(np.array([1, 2, 3], "int64"))]),
    "eye": ("none", lambda L, d: [L.eye(2, 3), L.eye(2, batch_shape=[2], dtype="int32")]),
    "fill_constant_batch_size_like": ("x", lambda L, d: [L.fill_constant_batch_size_like(
        d["x"], shape=[-1, 2], dtype="int64", value=7, input_dim_idx=1)]),
    "full": ("none", lambda L, d: [L.full([2, 2], 3.5), L.full([1, 3], 2, dtype="int64")]),
    "full_like": ("x", lambda L, d: [L.full_like(d["x"], 2.0), L.ones_like(d["x"]),
                                     L.zeros_like(d["x"])]),
    "fill_constant_var_shape": ("none", lambda L, d: [L.fill_constant(
        [2, L.fill_constant([1], "int32", 3)], "float32", 1.5)]),
    "assign_numpy": ("none", lambda L, d: [L.assign(np.array([[1, 2], [3, 4]], "int32")),
                                           L.assign(np.array([True, False]))]),
    "reverse": ("x", lambda L, d: [L.reverse(d["x"], axis=[0, 1]), L.reverse(d["x"], 1)]),
    "tril_triu": ("x", lambda L, d: [L.tril(d["x"]), L.tril(d["x"], -1), L.triu(d["x"], 1)]),
    "crop": ("x", lambda L, d: [L.crop(d["x"], shape=[2, 2], offsets=[1, 1])]),
    "crop_tensor": ("x", lambda L, d: [L.crop_tensor(d["x"], shape=[-1, 2], offsets=[1, 2])]),
    "expand": ("x", lambda L, d: [L.expand(d["x"], [2, 1])]),
    "expand_as": ("x", lambda L, d: [L.expand_as(d["x"], L.fill_constant([6, 8], "float32", 0))]),
    "flip": ("x3", lambda L, d: [L.flip(d["x"], dims=[0, 2])]),
    "gather_nd": ("x3", lambda L, d: [L.gather_nd(d["x"], L.assign(
        np.array([[1, 2], [0, 0]], "int64"))), L.gather_nd(d["x"], L.assign(
            np.array([[1, 2, 3]], "int32")))]),
    "index_sample": ("x", lambda L, d: [L.index_sample(d["x"], L.assign(
        np.array([[0, 3], [1, 1], [2, 0]], "int64")))]),
    "index_select": ("x", lambda L, d: [L.index_select(d["x"], L.assign(
        np.array([3, 0, 3], "int64")), dim=1)]),
    "meshgrid": ("none", lambda L, d: L.meshgrid([L.assign(np.array([1, 2, 3], "int32")),
                                                  L.assign(np.array([4, 5], "int32"))])),
    "multiplex": ("x", lambda L, d: [L.multiplex([d["x"], L.scale(d["x"], 2.0)], L.assign(
        np.array([[1], [0], [1]], "int32")))]),
    "nonzero": ("x", lambda L, d: [L.nonzero(L.assign(np.array([[1, 0], [0, 3]], "int32")))]
                + list(L.nonzero(L.assign(np.array([[1, 0], [0, 3]], "int32")), True))),
    "where": ("none", lambda L, d: [L.where(L.assign(np.array([True, False, True])))]),
    "pad": ("x", lambda L, d: [L.pad(d["x"], [0, 1, 2, 0], pad_value=9.0)]),
    "pad2d": ("img", lambda L, d: [L.pad2d(d["x"], [1, 0, 2, 1], mode=m) for m in
                                   ("constant", "reflect", "edge")]),
    "pad_constant_like": ("x", lambda L, d: [L.pad_constant_like(
        L.fill_constant([4, 6], "float32", 0), d["x"], pad_value=-1.0)]),
    "rank_shape_size": ("x3", lambda L, d: [L.rank(d["x"]), L.shape(d["x"]), L.size(d["x"])]),
    "roll": ("x", lambda L, d: [L.roll(d["x"], 1), L.roll(d["x"], [1, -1], [0, 1])]),
    "scatter": ("x", lambda L, d: [L.scatter(d["x"], L.assign(np.array([2, 0], "int64")),
                                             L.fill_constant([2, 4], "float32", 5.0)),
                                   L.scatter(d["x"], L.assign(np.array([1, 1], "int64")),
                                             L.fill_constant([2, 4], "float32", 5.0),
                                             overwrite=False)]),
    "scatter_nd": ("none", lambda L, d: [L.scatter_nd(
        L.assign(np.array([[1], [1], [0]], "int64")),
        L.assign(np.array([[1, 2], [3, 4], [5, 6]], "float32")), [3, 2])]),
    "scatter_nd_add": ("x", lambda L, d: [L.scatter_nd_add(
        d["x"], L.assign(np.array([[0, 1], [0, 1], [2, 3]], "int64")),
        L.assign(np.array([1.0, 2.0, 3.0], "float32")))]),
    "stack_unstack": ("x", lambda L, d: [L.stack([d["x"], d["x"]], axis=1)]
                      + L.unstack(d["x"], axis=1)),
    "strided_slice": ("x3", lambda L, d: [L.strided_slice(
        d["x"], axes=[0, 2], starts=[1, 3], ends=[2, 0], strides=[1, -2])]),
    "unique": ("u", lambda L, d: list(L.unique(d["u"])) + list(L.unique_with_counts(d["u"]))),
    "diag_embed": ("x", lambda L, d: [L.diag_embed(d["x"]), L.diag_embed(d["x"], 1, 0, 2)]),
    "shard_index": ("ids", lambda L, d: [L.shard_index(d["ids"], 8, 2, 1)]),
    "hash": ("ids", lambda L, d: [_hash(L, d["ids"])]),
    "reshape_variants": ("x", lambda L, d: [
        L.reshape(d["x"], [L.fill_constant([1], "int32", 2), 6]),
        L.reshape(d["x"], [12], actual_shape=L.assign(np.array([6, 2], "int32")))]),
    "split_minus_one": ("x", lambda L, d: L.split(d["x"], [1, -1, 2], dim=1)),
    "slice_var": ("x", lambda L, d: [L.slice(d["x"], axes=[1], starts=[
        L.fill_constant([1], "int32", 1)], ends=[3])]),
}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, (feed_name, build) in sorted(CASES.items()):
        feeds = _f(feed_name)
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
            fetch = build(fluid.layers, vs)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        out[name] = exe.run(prog, feed=feeds, fetch_list=fetch)
    save("tensor", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
