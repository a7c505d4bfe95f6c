"""fluid 1.8's forward outputs, gradients, static shapes and dtypes, and errors for the
manipulation / indexing / creation / logic layers, for tests/unit/test_layers_manip_oracle.py.
Run with PaddlePaddle 1.8.5:

    cd /tmp && python3.7 /path/to/tests/oracle/make_manip.py

CASES: name -> (feed names, build, grad). build(fluid, vars) returns the Variables to fetch;
with grad, the runner also fetches d(sum of o*o over the float outputs)/d(each float feed)
through fluid.backward.gradients. ERRORS: name -> (feed names, build) that fluid rejects (at
build or at run time); the stored answer is where it failed. run_case and run_error are shared
with make_convnn.py and with the tests, which run the same builds with spmd.fluid.
"""
import os
import sys

import numpy as np

R = np.random.RandomState(5)
FEEDS = {
    "x": R.uniform(-1, 1, (3, 4)).astype("float32"),
    "x3": R.uniform(-1, 1, (2, 3, 4)).astype("float32"),
    "x4": R.uniform(-1, 1, (2, 3, 1, 5)).astype("float32"),
    "y4": R.uniform(-1, 1, (4,)).astype("float32"),
    "xd": R.uniform(-1, 1, (3, 4)).astype("float64"),
    "img": R.uniform(-1, 1, (2, 2, 4, 5)).astype("float32"),
    "ids": np.array([[2], [0], [3]], "int64"),
    "idx": np.array([2, 0, 2], "int64"),
    "idx32": np.array([1, 0], "int32"),
    "b": np.array([[True, False, True, False]] * 3),
    "bb": np.array([True, True, False, False]),
    "i34": R.randint(-5, 5, (3, 4)).astype("int32"),
    "inf": np.array([[1.0, np.inf], [np.nan, 2.0]], "float32"),
    "lab": np.array([[1], [3], [0]], "int64"),
}
FEEDS.update({k + "_b": FEEDS[k] for k in ("x", "x3", "x4", "img", "ids")})

_DTYPES = {"FP32": "float32", "FP64": "float64", "FP16": "float16", "INT32": "int32",
           "INT64": "int64", "BOOL": "bool", "UINT8": "uint8", "INT8": "int8",
           "INT16": "int16"}


def dtype_name(dtype):
    """'float32' for fluid 1.8's VarType.FP32 and for spmd's dtype alike."""
    s = str(dtype)
    return _DTYPES.get(s.split(".")[-1], s) if s.startswith("VarType.") else s


def param_values(names_and_shapes):
    """Fixed values per parameter, so random initialization plays no part."""
    out = {}
    for i, (name, shape) in enumerate(sorted(names_and_shapes)):
        out[name] = np.random.RandomState(200 + i).uniform(-1, 1, shape).astype("float32")
    return out


def _build(fluid, feed_names, build, grad, source):
    feeds = {k: source[k] for k in feed_names}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard():
        with fluid.program_guard(prog, startup):
            vs = {}
            for k, v in feeds.items():
                # a name ending in _b is declared with an unknown batch dim, as real programs
                # do; one ending in _hw also with unknown dims 2 and 3 (image height, width)
                unknown = {0} if k.endswith("_b") else {0, 2, 3} if k.endswith("_hw") else ()
                shape = [-1 if i in unknown else d for i, d in enumerate(v.shape)]
                vs[k] = fluid.data(k, shape, str(v.dtype))
                vs[k].stop_gradient = v.dtype.kind != "f"
            fetch = list(build(fluid, vs))
            grads = []
            if grad:
                floats = [o for o in fetch if dtype_name(o.dtype).startswith("float")]
                loss = fluid.layers.sums([fluid.layers.cast(fluid.layers.reduce_sum(o * o),
                                                            "float32") for o in floats])
                wrt = [vs[k] for k in feed_names if feeds[k].dtype.kind == "f"]
                grads = [g for g in fluid.backward.gradients(loss, wrt) if g is not None]
    return prog, startup, feeds, fetch, grads


def run_case(fluid, name, cases, source=None):
    """Run case `name` of `cases` on feeds from `source` (default FEEDS): {"outs", "shapes",
    "dtypes", "grads"}."""
    feed_names, build, grad = cases[name]
    prog, startup, feeds, fetch, grads = _build(fluid, feed_names, build, grad,
                                                source or FEEDS)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    block = prog.global_block()
    params = [(p.name, tuple(p.shape)) for p in block.all_parameters()]
    for pname, value in param_values(params).items():
        value = value.astype(dtype_name(block.var(pname).dtype))
        scope.find_var(pname).get_tensor().set(value, fluid.CPUPlace())
    res = exe.run(prog, feed=feeds, fetch_list=fetch + grads, scope=scope)
    res = [np.asarray(r) for r in res]
    return {"outs": res[:len(fetch)], "grads": res[len(fetch):],
            "shapes": [[int(d) for d in o.shape] for o in fetch],
            "dtypes": [dtype_name(o.dtype) for o in fetch]}


def run_error(fluid, name, errors, source=None):
    """'build' or 'run' (where fluid raised) or 'ok'."""
    feed_names, build = errors[name]
    try:
        prog, startup, feeds, fetch, _ = _build(fluid, feed_names, build, False,
                                                source or FEEDS)
    except Exception:  # noqa: BLE001 - any rejection counts; where it happened is the answer
        return "build"
    try:
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)
    except Exception:  # noqa: BLE001
        return "run"
    return "ok"


def _c(L, value, dtype="float32"):
    return L.assign(np.array(value, dtype))


CASES = {
    "reshape_zero_minus_one": (["x3"], lambda F, d: [
        F.layers.reshape(d["x3"], [0, -1]), F.layers.reshape(d["x3"], [-1, 2, 2]),
        F.layers.reshape(d["x3"], [0, 0, 2, -1]), F.layers.reshape(d["x3"], (4, 0, -1))], True),
    "reshape_actual_shape": (["x3"], lambda F, d: [F.layers.reshape(
        d["x3"], [-1, 12], actual_shape=_c(F.layers, [4, 6], "int32"))], True),
    "reshape_tensor_shape": (["x3"], lambda F, d: [F.layers.reshape(
        d["x3"], _c(F.layers, [3, 8], "int32")), F.layers.reshape(
        d["x3"], [F.layers.fill_constant([1], "int32", 6), -1])], True),
    "reshape_act_inplace": (["x"], lambda F, d: [F.layers.reshape(
        d["x"] * 1.0, [2, 6], act="relu", inplace=True)], True),
    "transpose": (["x3", "x4"], lambda F, d: [F.layers.transpose(d["x3"], [2, 0, 1]),
                                              F.layers.transpose(d["x4"], [3, 1, 0, 2])], True),
    "concat": (["x", "xd", "x3"], lambda F, d: [
        F.layers.concat([d["x"], d["x"] * 2.0, d["x"]], axis=-1),
        F.layers.concat([d["x3"], d["x3"]], axis=1),
        F.layers.concat([d["x"], d["x"]])], True),
    "concat_axis_tensor": (["x"], lambda F, d: [F.layers.concat(
        [d["x"], d["x"]], axis=F.layers.fill_constant([1], "int32", 1))], False),
    "split": (["x3"], lambda F, d: F.layers.split(d["x3"], 2, dim=-1)
              + F.layers.split(d["x3"], [1, -1], dim=1)
              + F.layers.split(d["x3"], [2, 1, 1], dim=2), True),
    "stack_unstack": (["x3"], lambda F, d: [
        F.layers.stack([d["x3"], d["x3"] * 3.0], axis=-1), F.layers.stack([d["x3"]])]
        + F.layers.unstack(d["x3"], axis=-2) + F.layers.unstack(d["x3"]), True),
    "squeeze_unsqueeze": (["x4"], lambda F, d: [
        F.layers.squeeze(d["x4"], [2]), F.layers.squeeze(d["x4"], [-2]),
        F.layers.squeeze(d["x4"], []), F.layers.unsqueeze(d["x4"], [0, 2]),
        F.layers.unsqueeze(d["x4"], [-1]), F.layers.unsqueeze(d["x4"], 1)], True),
    "expand": (["x", "x4"], lambda F, d: [
        F.layers.expand(d["x"], [2, 3]), F.layers.expand(d["x4"], [1, 1, 3, 1]),
        F.layers.expand(d["x"], [F.layers.fill_constant([1], "int32", 2), 1])], True),
    "expand_as": (["x"], lambda F, d: [F.layers.expand_as(
        d["x"], F.layers.fill_constant([6, 8], "float32", 0.0))], True),
    "slice_bounds": (["x3"], lambda F, d: [
        F.layers.slice(d["x3"], [1, 2], [-2, 1], [10000, -1]),
        F.layers.slice(d["x3"], [0, 2], [-10, -3], [1, 100]),
        F.layers.slice(d["x3"], [2], [0], [-1]),
        F.layers.slice(d["x3"], [0, 1, 2], [1, -1, 3], [2, 3, 4])], True),
    "strided_slice": (["x3"], lambda F, d: [
        F.layers.strided_slice(d["x3"], [2], [-1], [-5], [-1]),
        F.layers.strided_slice(d["x3"], [0, 1, 2], [0, 0, 3], [2, 100, 0], [1, 2, -2]),
        F.layers.strided_slice(d["x3"], [1], [-100], [100], [2])], True),
    # end -1 with a negative stride runs through index 0 in fluid (its "no stop")
    "strided_slice_bounds": (["x3"], lambda F, d: [
        F.layers.strided_slice(d["x3"], [2], [-1], [-1], [-1]),
        F.layers.strided_slice(d["x3"], [0, 2], [1, 2], [-1, -1], [-1, -1]),
        F.layers.strided_slice(d["x3"], [2], [10000], [-10000], [-1]),
        F.layers.strided_slice(d["x3"], [1], [-10000], [10000], [1]),
        F.layers.strided_slice(d["x3"], [2], [-2], [0], [-1]),
        F.layers.strided_slice(d["x3"], [1, 2], [0, -3], [3, 100], [2, 3])], True),
    # a negative stride of 2 or more: fluid 1.8 is one element off (test_layers_manip_oracle)
    "strided_slice_negative_step": (["x3"], lambda F, d: [
        F.layers.strided_slice(d["x3"], [2], [2], [0], [-2]),
        F.layers.strided_slice(d["x3"], [1], [2], [-10000], [-2])], False),
    "gather": (["x", "idx", "idx32"], lambda F, d: [
        F.layers.gather(d["x"], d["idx"]), F.layers.gather(d["x"], d["idx32"]),
        F.layers.gather(d["x"], d["idx"], overwrite=False)], True),
    "gather_nd": (["x3"], lambda F, d: [
        F.layers.gather_nd(d["x3"], _c(F.layers, [[1, 2], [1, 2], [0, 0]], "int64")),
        F.layers.gather_nd(d["x3"], _c(F.layers, [[[1]], [[0]]], "int32"))], True),
    "scatter_updates": (["x"], lambda F, d: [
        F.layers.scatter(F.layers.fill_constant([3, 4], "float32", 1.0),
                         _c(F.layers, [2, 0, 2], "int64"), d["x"] * 2.0),
        F.layers.scatter(F.layers.fill_constant([3, 4], "float32", 1.0),
                         _c(F.layers, [1, 1, 0], "int64"), d["x"] + 1.0,
                         overwrite=False)], True),
    # fluid 1.8 passes Out@GRAD whole to X (see test_layers_manip_oracle.py)
    "scatter_x": (["x"], lambda F, d: [
        F.layers.scatter(d["x"], _c(F.layers, [2, 2], "int64"),
                         F.layers.fill_constant([2, 4], "float32", 1.0))], True),
    "scatter_x_add": (["x"], lambda F, d: [
        F.layers.scatter(d["x"], _c(F.layers, [0], "int64"),
                         F.layers.fill_constant([1, 4], "float32", 1.0), overwrite=False)],
        True),
    "scatter_nd_add": (["x3"], lambda F, d: [F.layers.scatter_nd_add(
        d["x3"], _c(F.layers, [[1, 2], [1, 2], [0, 0]], "int64"),
        F.layers.fill_constant([3, 4], "float32", 1.5) * F.layers.reduce_sum(d["x3"]))], True),
    "flatten": (["x4"], lambda F, d: [F.layers.flatten(d["x4"], a) for a in (0, 1, 2, 4)],
                True),
    "crop": (["x3"], lambda F, d: [
        F.layers.crop(d["x3"], shape=[1, 2, 3], offsets=[1, 0, 1]),
        F.layers.crop(d["x3"], shape=F.layers.fill_constant([2, 2, 2], "float32", 0)),
        F.layers.crop_tensor(d["x3"], shape=[-1, 2, 2], offsets=[0, 1, 2]),
        F.layers.crop_tensor(d["x3"], shape=_c(F.layers, [1, 3, 2], "int32"),
                             offsets=[1, 0, 0])], True),
    "pad": (["x3", "img"], lambda F, d: [
        F.layers.pad(d["x3"], [1, 0, 0, 2, 1, 1], 0.5),
        F.layers.pad2d(d["img"], [1, 2, 0, 1], mode="reflect"),
        F.layers.pad2d(d["img"], [2, 0, 1, 1], mode="edge"),
        F.layers.pad2d(d["img"], [1, 1, 1, 1], pad_value=2.0),
        F.layers.pad_constant_like(F.layers.fill_constant([3, 5, 6], "float32", 0), d["x3"],
                                   1.0)], True),
    "roll_flip": (["x3"], lambda F, d: [
        F.layers.roll(d["x3"], 5), F.layers.roll(d["x3"], [-1, 7], [0, 2]),
        F.layers.flip(d["x3"], [1]), F.layers.flip(d["x3"], [-1, 0]),
        F.layers.reverse(d["x3"], [-1])], True),
    "unique": (["idx"], lambda F, d: list(F.layers.unique(d["idx"], "int32"))
               + list(F.layers.unique_with_counts(d["idx"], "int64")), False),
    "where_argsort_topk": (["x", "b"], lambda F, d: [F.layers.where(d["b"])]
                           + list(F.layers.argsort(d["x"]))
                           + list(F.layers.argsort(d["x"], axis=0, descending=True))
                           + list(F.layers.topk(d["x"], 2)), False),
    "topk_rank3": (["x3"], lambda F, d: list(F.layers.topk(d["x3"], 3)), False),
    "one_hot": (["ids", "idx"], lambda F, d: [
        F.layers.one_hot(d["ids"], 4),
        F.layers.one_hot(d["ids"], 3, allow_out_of_range=True)], False),
    "shape_cast": (["x", "x3", "i34"], lambda F, d: [
        F.layers.shape(d["x3"]), F.layers.cast(d["x"] * 4.0, "int32"),
        F.layers.cast(d["x"], "bool"), F.layers.cast(d["i34"], "float64"),
        F.layers.cast(d["x"], "float64"), F.layers.cast(d["i34"], "int64")], True),
    "fill_like": (["x", "x3"], lambda F, d: [
        F.layers.fill_constant_batch_size_like(d["x3"], [1, 5], "float32", 2.5),
        F.layers.fill_constant_batch_size_like(d["x3"], [7, -1], "int32", 3, 0, 1),
        F.layers.fill_constant([2, 3], "int64", 4), F.layers.fill_constant([1], "bool", True),
        F.layers.zeros_like(d["x"]), F.layers.ones_like(d["x3"]),
        F.layers.zeros([2], "int32"), F.layers.ones([1, 2], "float64")], False),
    "assign": (["x"], lambda F, d: [F.layers.assign(d["x"] * 2.0),
                                    F.layers.assign(np.arange(6, dtype="int64").reshape(2, 3)),
                                    F.layers.assign(np.array([1.5, 2.5], "float32"))], True),
    "range_linspace_eye_diag": ([], lambda F, d: [
        F.layers.range(0, 1, 0.25, "float32"), F.layers.range(5, 0, -2, "int64"),
        F.layers.linspace(1, 0, 4, "float64"), F.layers.linspace(2, 3, 1, "float32"),
        F.layers.eye(3), F.layers.eye(2, 4, dtype="int64"),
        F.layers.diag(np.array([1.5, 2.0], "float32")),
        F.layers.diag(_c(F.layers, [3, 4], "int32"))], False),
    "arg_max_min": (["x3", "i34"], lambda F, d: [
        F.layers.argmax(d["x3"]), F.layers.argmax(d["x3"], -1), F.layers.argmin(d["x3"], 1),
        F.layers.argmax(d["i34"], 1)], False),
    "cumsum": (["x3"], lambda F, d: [
        F.layers.cumsum(d["x3"]), F.layers.cumsum(d["x3"], axis=1, exclusive=True),
        F.layers.cumsum(d["x3"], axis=-1, reverse=True),
        F.layers.cumsum(d["x3"], axis=2, exclusive=True, reverse=True)], True),
    "clip": (["x", "x3"], lambda F, d: [
        F.layers.clip(d["x"], -0.3, 0.5), F.layers.clip_by_norm(d["x3"], 1.0),
        F.layers.clip_by_norm(d["x"], 100.0)], True),
    "sum_sums": (["x", "xd"], lambda F, d: [
        F.layers.sum([d["x"], d["x"] * 2.0, d["x"]]), F.layers.sums([d["x"], d["x"]]),
        F.layers.sum(d["x"])], True),
    "inf_nan": (["inf", "x"], lambda F, d: [
        F.layers.has_inf(d["inf"]), F.layers.has_nan(d["inf"]), F.layers.isfinite(d["inf"]),
        F.layers.has_inf(d["x"]), F.layers.isfinite(d["x"])], False),
    "logic": (["b", "bb"], lambda F, d: [
        F.layers.logical_and(d["b"], d["b"]), F.layers.logical_or(d["b"], F.layers.logical_not(
            d["b"])), F.layers.logical_xor(d["bb"], d["bb"]), F.layers.logical_not(d["bb"])],
        False),
    "batch_unknown": (["x_b", "x3_b", "x4_b", "ids_b"], lambda F, d: [
        F.layers.reshape(d["x3_b"], [0, -1]), F.layers.reshape(d["x3_b"], [-1, 6]),
        F.layers.flatten(d["x4_b"], 2), F.layers.transpose(d["x3_b"], [1, 0, 2]),
        F.layers.concat([d["x_b"], d["x_b"]], 1), F.layers.concat([d["x_b"], d["x_b"]], 0),
        F.layers.squeeze(d["x4_b"], [2]), F.layers.unsqueeze(d["x_b"], [1]),
        F.layers.expand(d["x_b"], [2, 2]), F.layers.slice(d["x3_b"], [0, 2], [0, 1], [100, 3]),
        F.layers.stack([d["x_b"], d["x_b"]], 1), F.layers.one_hot(d["ids_b"], 4),
        F.layers.fill_constant_batch_size_like(d["x_b"], [1, 3], "float32", 1.0),
        F.layers.crop_tensor(d["x3_b"], [-1, 2, 2], [0, 1, 1]),
        F.layers.pad(d["x_b"], [0, 0, 1, 1]),
        F.layers.gather(d["x_b"], _c(F.layers, [2, 0], "int64")),
        F.layers.strided_slice(d["x3_b"], [1], [0], [3], [2]),
        F.layers.sums([d["x_b"], d["x_b"]]), F.layers.cast(d["x_b"], "float64"),
        F.layers.argmax(d["x3_b"], 1), F.layers.reduce_sum(d["x3_b"], 1)]
        + F.layers.split(d["x3_b"], [1, 2], 1), True),
    # no gradient: fluid 1.8 makes none for top_k (spmd does, see its docstring)
    "batch_unknown_sort": (["x_b"], lambda F, d: list(F.layers.topk(d["x_b"], 2))
                           + list(F.layers.argsort(d["x_b"], 0)), False),
    "compare_broadcast": (["x", "y4", "x3", "i34"], lambda F, d: [
        F.layers.less_than(d["x"], d["y4"]), F.layers.greater_equal(d["x3"], d["y4"]),
        F.layers.equal(d["i34"], F.layers.fill_constant([1], "int32", 0)),
        F.layers.not_equal(d["x"], d["x"]), F.layers.less_equal(d["x3"], d["x"]),
        F.layers.greater_than(d["x"], d["y4"])], False),
}

ERRORS = {
    "reshape_two_minus_one": (["x3"], lambda F, d: [F.layers.reshape(d["x3"], [-1, -1])]),
    "reshape_bad_count": (["x3"], lambda F, d: [F.layers.reshape(d["x3"], [5, 5])]),
    "reshape_zero_out_of_rank": (["x"], lambda F, d: [F.layers.reshape(d["x"], [1, 1, 0, -1])]),
    "concat_mismatch": (["x", "x3"], lambda F, d: [F.layers.concat([d["x"], d["x3"]])]),
    "concat_dim_mismatch": (["x"], lambda F, d: [F.layers.concat(
        [d["x"], F.layers.fill_constant([2, 3], "float32", 0)], axis=0)]),
    "split_not_divisible": (["x"], lambda F, d: F.layers.split(d["x"], 3, dim=1)),
    "split_sections_bad_sum": (["x"], lambda F, d: F.layers.split(d["x"], [1, 2], dim=1)),
    "split_two_minus_one": (["x"], lambda F, d: F.layers.split(d["x"], [-1, -1], dim=1)),
    "transpose_bad_perm": (["x3"], lambda F, d: [F.layers.transpose(d["x3"], [0, 1])]),
    "transpose_repeat_perm": (["x3"], lambda F, d: [F.layers.transpose(d["x3"], [0, 1, 1])]),
    "stack_mismatch": (["x", "x3"], lambda F, d: [F.layers.stack([d["x"], d["x3"]])]),
    "expand_rank_mismatch": (["x"], lambda F, d: [F.layers.expand(d["x"], [2])]),
    "gather_float_index": (["x", "y4"], lambda F, d: [F.layers.gather(d["x"], d["y4"])]),
    "gather_out_of_range": (["x"], lambda F, d: [F.layers.gather(d["x"], _c(
        F.layers, [5], "int64"))]),
    "flatten_axis_out": (["x"], lambda F, d: [F.layers.flatten(d["x"], 3)]),
    "cast_bad_dtype": (["x"], lambda F, d: [F.layers.cast(d["x"], "complex_bad")]),
    "one_hot_out_of_range": (["ids"], lambda F, d: [F.layers.one_hot(d["ids"], 3)]),
    "topk_k_too_big": (["x"], lambda F, d: list(F.layers.topk(d["x"], 5))),
    "crop_too_big": (["x"], lambda F, d: [F.layers.crop(d["x"], shape=[3, 3], offsets=[1, 2])]),
    "slice_len_mismatch": (["x"], lambda F, d: [F.layers.slice(d["x"], [0, 1], [0], [1])]),
    "unsqueeze_axis_out": (["x"], lambda F, d: [F.layers.unsqueeze(d["x"], [5])]),
    "logical_non_bool": (["x"], lambda F, d: [F.layers.logical_and(d["x"], d["x"])]),
    "compare_bad_broadcast": (["x", "x3"], lambda F, d: [F.layers.less_than(
        d["x"], F.layers.fill_constant([3, 5], "float32", 0))]),
    "fill_constant_bad_dtype": ([], lambda F, d: [F.layers.fill_constant([2], "str", 1)]),
    "one_hot_rank1": (["idx"], lambda F, d: [F.layers.one_hot(d["idx"], 3)]),
    "pad2d_int_paddings": (["img"], lambda F, d: [F.layers.pad2d(d["img"], 1)]),
    "slice_empty": (["x3"], lambda F, d: [F.layers.slice(d["x3"], [1], [2], [2])]),
    "strided_slice_empty": (["x3"], lambda F, d: [F.layers.strided_slice(
        d["x3"], [2], [1], [3], [-1])]),
    "strided_slice_empty_positive": (["x3"], lambda F, d: [F.layers.strided_slice(
        d["x3"], [1], [2], [1], [1])]),
    "squeeze_non_one": (["x4"], lambda F, d: [F.layers.squeeze(d["x4"], [0, 2])]),
    "slice_negative_axis": (["x"], lambda F, d: [F.layers.slice(d["x"], [-1], [1], [3])]),
    "logical_broadcast": (["b", "bb"], lambda F, d: [F.layers.logical_and(d["b"], d["bb"])]),
}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    out = {name: run_case(fluid, name, CASES) for name in sorted(CASES)}
    errors = {name: run_error(fluid, name, ERRORS) for name in sorted(ERRORS)}
    save("manip", {"cases": out, "errors": errors}, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
