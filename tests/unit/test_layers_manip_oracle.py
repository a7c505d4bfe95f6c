"""fluid.layers manipulation / indexing / creation / logic builders against fluid 1.8.5
(tests/oracle/make_manip.py): forward outputs, gradients (fluid.backward.gradients), static
shapes and dtypes, and which bad arguments are rejected.

Where fluid 1.8 is plainly wrong spmd differs on purpose; each such case is listed in
DIFFERS (what fluid does, what spmd does instead) and checked for spmd's answer."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_array_like_fluid, assert_refuses_like_fluid
from oracle.make_manip import CASES, ERRORS, FEEDS, run_case, run_error
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("manip")

# case -> (fluid 1.8, spmd)
DIFFERS = {
    "expand_as": "fluid declares the output [0, 0] until run time; spmd declares the target's "
                 "shape [6, 8]",
    "inf_nan": "fluid declares has_inf / has_nan outputs with the input's dtype though they "
               "hold bool; spmd declares bool",
    "scatter_x": "fluid passes the whole Out@GRAD to X, rows replaced by the scatter included; "
                 "spmd gives those rows no gradient (they do not reach Out)",
    "scatter_x_add": "as scatter_x, for overwrite=False (the rows are zeroed, then added to)",
    "strided_slice_negative_step": "a negative stride of 2 or more: fluid 1.8's CPU kernel "
                                   "aligns the picks to `end`, not `start` (x[5:1:-2] gives "
                                   "[4, 2]); spmd gives python's [5, 3]",
    "batch_unknown": "static shapes with an unknown batch: reshape(x [-1, 3, 4], [0, -1]) is "
                     "[-1, -1] in fluid, [-1, 12] in spmd (the copied unknown dim cancels); "
                     "flatten(x [-1, 3, 1, 5], 2) is [-3, 5] in fluid (-1 * 3), [-1, 5] in spmd",
}
# (case, output index) -> spmd's static shape where fluid's is less precise or wrong
SHAPE_DIFFERS = {("expand_as", 0): [6, 8], ("batch_unknown", 0): [-1, 12],
                 ("batch_unknown", 2): [-1, 5]}
# case -> where spmd raises ("ok": it does not), and why it is not where fluid does
ERROR_DIFFERS = {
    "crop_too_big": ("build", "fluid reads past the end of X; spmd rejects the crop"),
    "gather_out_of_range": ("run", "fluid reads past the end of X; spmd rejects the index"),
    "slice_negative_axis": ("build", "fluid reads its shape array at index -1 (undefined: "
                                     "it slices nothing or fails, run to run)"),
    "logical_broadcast": ("ok", "fluid 1.8 needs equal element counts; spmd broadcasts as "
                                "paddle 2.x does"),
}


def _close(got, want, what):
    assert_array_like_fluid(got, want, what, tol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got, want = run_case(fluid, name, CASES), ORACLE["cases"][name]
    if name == "strided_slice_negative_step":
        # fluid 1.8 takes x[start:end:-s] as reversed(x[end + 1:start + 1:s]), which starts
        # one element early when s does not divide start - end: x[2:0:-2] gives x[1]
        # (where s divides it, as in x[2:-10000:-2] of a size-3 axis, both agree)
        x = FEEDS["x3"]
        np.testing.assert_array_equal(got["outs"][0], x[..., 2:0:-2])
        np.testing.assert_array_equal(want["outs"][0], x[..., 1:2])
        np.testing.assert_array_equal(got["outs"][1], x[:, 2::-2])
        np.testing.assert_array_equal(want["outs"][1], x[:, 2::-2])
        return
    for i, (g, w) in enumerate(zip(got["shapes"], want["shapes"])):
        assert g == SHAPE_DIFFERS.get((name, i), w), f"{name}[{i}]: static shape {g}, fluid {w}"
    if name != "inf_nan":
        assert got["dtypes"] == want["dtypes"], f"{name}: static dtypes"
    assert len(got["outs"]) == len(want["outs"]) and len(got["grads"]) == len(want["grads"])
    for i, (g, w) in enumerate(zip(got["outs"], want["outs"])):
        _close(g, w, f"{name} out[{i}]")
    if name not in ("scatter_x", "scatter_x_add"):
        for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
            _close(g, w, f"{name} grad[{i}]")


def test_documented_differences():
    assert ORACLE["cases"]["expand_as"]["shapes"] == [[0, 0]]
    fluid_shapes = ORACLE["cases"]["batch_unknown"]["shapes"]
    assert fluid_shapes[0] == [-1, -1] and fluid_shapes[2] == [-3, 5]
    got = run_case(fluid, "inf_nan", CASES)
    assert got["dtypes"] == ["bool"] * 5
    assert [o.dtype.name for o in ORACLE["cases"]["inf_nan"]["outs"]] == ["bool"] * 5
    # scatter: out = x with rows replaced by ones; loss = sum(out^2), so dX = 2x off the rows
    x = FEEDS["x"]
    for name, rows in (("scatter_x", [2]), ("scatter_x_add", [0])):
        (dx,) = run_case(fluid, name, CASES)["grads"]
        want = 2 * x
        want[rows] = 0
        np.testing.assert_allclose(dx, want, rtol=1e-6, err_msg=name)
        fluid_dx = ORACLE["cases"][name]["grads"][0]
        np.testing.assert_allclose(fluid_dx[rows], 2.0)  # fluid: Out@GRAD itself (2 * 1)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_rejects_what_fluid_rejects(name):
    want, got = ORACLE["errors"][name], run_error(fluid, name, ERRORS)
    assert_refuses_like_fluid(name, got, want, ERROR_DIFFERS)


def _build(fn):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        return fn(fluid.layers)


def test_squeeze_of_a_non_one_dim_says_which():
    with pytest.raises(InvalidArgumentError, match=r"axes entry 0 names a dim of size 2"):
        _build(lambda L: L.squeeze(fluid.data("s", [2, 3, 1], "float32"), [0, 2]))
    # an unknown dim may be 1 at run time: accepted when building
    out = _build(lambda L: L.squeeze(fluid.data("s", [-1, 3, 1], "float32"), [0, 2]))
    assert out.shape == (3,)


def test_slice_negative_axis_names_the_range():
    with pytest.raises(InvalidArgumentError, match="axes entry -1 is out of range"):
        _build(lambda L: L.slice(fluid.data("s", [3, 4], "float32"), [-1], [1], [3]))


def test_gather_overwrite_gradient_modes():
    """A repeated index: overwrite=True (fluid's default) keeps the last occurrence's
    gradient, overwrite=False sums them (stored fluid values in the 'gather' case too)."""
    def grad(overwrite):
        prog = fluid.Program()
        with fluid.program_guard(prog, fluid.Program()):
            x = fluid.data("x", [3, 2], "float32")
            x.stop_gradient = False
            idx = fluid.layers.assign(np.array([1, 0, 1], "int64"))
            w = fluid.layers.assign(np.array([[1, 2], [3, 4], [5, 6]], "float32"))
            out = fluid.layers.gather(x, idx, overwrite=overwrite)
            (dx,) = fluid.backward.gradients(fluid.layers.reduce_sum(out * w), [x])
        feed = {"x": np.zeros((3, 2), "float32")}
        return fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=[dx])[0]

    np.testing.assert_array_equal(grad(True), [[3, 4], [5, 6], [0, 0]])
    np.testing.assert_array_equal(grad(False), [[3, 4], [6, 8], [0, 0]])
