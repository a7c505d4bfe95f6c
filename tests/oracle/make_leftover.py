"""Outputs of fluid 1.8's continuous_value_model, gather_tree, similarity_focus, crop with -1
in shape, and split / concat with a Variable axis (values and gradients), for
tests/unit/test_ops_leftover.py. Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_leftover.py

CASES is shared with the test: each entry is (feeds, build), where build(fluid, vars) returns
the list of Variables to fetch; the test runs the same build with spmd.fluid.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(11)
# cvm: the first two columns of each row are show and click counts
CVM_X = np.concatenate([R.randint(1, 9, (4, 2)), R.uniform(-1, 1, (4, 3))], 1).astype("float32")
CVM_SC = R.randint(0, 5, (4, 2)).astype("float32")
CVM_W = R.uniform(0.5, 1.5, (4, 5)).astype("float32")
X34 = R.uniform(-1, 1, (3, 4)).astype("float32")
X234 = R.uniform(-1, 1, (2, 3, 4)).astype("float32")
W234 = R.uniform(0.5, 1.5, (2, 3, 4)).astype("float32")
# the example of fluid's gather_tree docstring, and a larger random tree
TREE_IDS = np.array([[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]], "int64")
TREE_PARENTS = np.array([[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]], "int64")
RAND_IDS = R.randint(0, 20, (4, 2, 3)).astype("int32")
RAND_PARENTS = R.randint(0, 3, (4, 2, 3)).astype("int32")
# the example of fluid's similarity_focus docstring, and a random tensor without ties
FOCUS_DOC = np.array([[[[0.8, 0.1], [0.4, 0.5]], [[0.9, 0.7], [0.9, 0.9]],
                       [[0.8, 0.9], [0.1, 0.2]]],
                      [[[0.2, 0.5], [0.3, 0.4]], [[0.9, 0.7], [0.8, 0.4]],
                       [[0.0, 0.2], [0.4, 0.7]]]], "float32")
FOCUS_RAND = R.permutation(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype("float64") / 100.0

FEEDS = {
    "cvm": {"x": CVM_X, "sc": CVM_SC},
    "x": {"x": X34},
    "x3": {"x": X234},
    "tree": {"ids": TREE_IDS, "parents": TREE_PARENTS},
    "tree_rand": {"ids": RAND_IDS, "parents": RAND_PARENTS},
    "focus_doc": {"x": FOCUS_DOC},
    "focus_rand": {"x": FOCUS_RAND},
}


def _cvm(fluid, d, use_cvm):
    """Y and X's gradient for the loss sum(Y * W)."""
    x = d["x"]
    x.stop_gradient = False
    y = fluid.layers.continuous_value_model(x, d["sc"], use_cvm=use_cvm)
    w = fluid.layers.assign(CVM_W if use_cvm else CVM_W[:, 2:].copy())
    return [y] + fluid.gradients([y], [x], target_gradients=[w])


def _split_var_dim(fluid, d):
    """split along a dim held in a Variable, and X's gradient through the pieces."""
    x = d["x"]
    x.stop_gradient = False
    dim = fluid.layers.fill_constant([1], "int32", 2)
    parts = fluid.layers.split(x, [1, 3], dim=dim)
    loss = fluid.layers.reduce_sum(parts[1] * fluid.layers.assign(W234[:, :, 1:].copy()))
    loss = loss + fluid.layers.reduce_sum(parts[0] * 2.0)
    return parts + fluid.gradients([loss], [x])


def _concat_var_axis(fluid, d):
    x = d["x"]
    x.stop_gradient = False
    axis = fluid.layers.fill_constant([1], "int32", 1)
    out = fluid.layers.concat([x, x * 2.0], axis=axis)
    # the output's shape is a run-time value, so the weights enter through a loss
    loss = fluid.layers.reduce_sum(out * fluid.layers.assign(np.tile(W234, (1, 2, 1))))
    return [out] + fluid.gradients([loss], [x])


def _crop(fluid, d, shape, offsets):
    x = d["x"]
    x.stop_gradient = False
    out = fluid.layers.crop(x, shape=shape, offsets=offsets)
    return [out] + fluid.gradients([out], [x])


CASES = {
    "cvm_use_cvm": ("cvm", lambda F, d: _cvm(F, d, True)),
    "cvm_no_cvm": ("cvm", lambda F, d: _cvm(F, d, False)),
    "gather_tree_doc": ("tree", lambda F, d: [F.layers.gather_tree(d["ids"], d["parents"])]),
    "gather_tree_rand": ("tree_rand",
                         lambda F, d: [F.layers.gather_tree(d["ids"], d["parents"])]),
    "similarity_focus_doc": ("focus_doc", lambda F, d: [
        F.layers.similarity_focus(d["x"], axis=1, indexes=[0])]),
    "similarity_focus_axes": ("focus_rand", lambda F, d: [
        F.layers.similarity_focus(d["x"], axis=1, indexes=[0, 2]),
        F.layers.similarity_focus(d["x"], axis=2, indexes=[1]),
        F.layers.similarity_focus(d["x"], axis=3, indexes=[4, 0, 2])]),
    # fluid's crop reads -1 in shape[0] as X's batch size (and fails on -1 elsewhere)
    "crop_minus_one_batch": ("x", lambda F, d: _crop(F, d, [-1, 2], [0, 1])),
    "crop_minus_one_full": ("x", lambda F, d: _crop(F, d, [-1, 4], None)),
    "split_var_dim": ("x3", _split_var_dim),
    "concat_var_axis": ("x3", _concat_var_axis),
}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {}
    for name, (feed_name, build) in sorted(CASES.items()):
        feeds = FEEDS[feed_name]
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {k: fluid.data(k, list(v.shape), str(v.dtype)) for k, v in feeds.items()}
            fetch = build(fluid, vs)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        out[name] = exe.run(prog, feed=feeds, fetch_list=fetch)
    save("leftover", out, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
