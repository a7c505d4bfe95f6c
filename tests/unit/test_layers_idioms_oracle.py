"""Idioms of real fluid programs (BERT attention and masked-LM gathers, YOLO upsampling, SE
blocks) and edge cases of creation / casting / sorting layers against fluid 1.8.5
(tests/oracle/make_idioms.py). Where fluid 1.8 is plainly wrong, spmd differs on purpose:
SHAPE_DIFFERS and ERROR_DIFFERS say how, and the tests check spmd's answer."""
from __future__ import annotations

import numpy as np
import pytest
from fluid_compare import assert_outputs_like_fluid, assert_refuses_like_fluid
from oracle.make_idioms import CASES, ERRORS, FEEDS, persistable_names
from oracle.make_manip import run_case, run_error
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("idioms")

# (case, output) -> spmd's static shape, where fluid 1.8 declares one the run contradicts
SHAPE_DIFFERS = {
    # topk with k a Variable: fluid declares a last dim of 1 (the attr's default), runs k = 2
    ("tensor_args", 0): [3, -1], ("tensor_args", 1): [3, -1],
    # pad2d with Variable paddings: fluid declares the input's shape, runs a padded one
    ("tensor_args", 7): [1, 1, -1, -1],
    # an image of unknown H, W: fluid keeps -1 for global pooling's 1 x 1 and multiplies the
    # -1s as numbers in pixel_shuffle (-1 * 2 = -2) and flatten (-1 * 4 = -4, -1 * -1 = 1)
    ("unknown_hw", 4): [-1, 4, 1, 1], ("unknown_hw", 8): [-1, 1, -1, -1],
    ("unknown_hw", 9): [-1, -1],
}
# case -> (where spmd raises, or "ok"; why it is not where fluid 1.8 does)
ERROR_DIFFERS = {
    "crop_tensor_offsets_var": ("ok", "fluid's layer sets the offsets attribute beside the "
                                      "Offsets tensor, which its op then refuses"),
    "embedding_int32_ids": ("ok", "int32 ids are looked up as int64 ones (paddle 2.x too)"),
    "matmul_batch_broadcast": ("ok", "batch dims broadcast as in paddle 2.x and numpy"),
    "pool2d_size0_not_global": ("build", "fluid pools with a 0x0 window: -FLT_MAX everywhere"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_fluid(name):
    got, want = run_case(fluid, name, CASES, FEEDS), ORACLE["cases"][name]
    for i, (g, w) in enumerate(zip(got["shapes"], want["shapes"])):
        assert g == SHAPE_DIFFERS.get((name, i), w), f"{name}[{i}]: static shape {g}, fluid {w}"
    assert got["dtypes"] == want["dtypes"], f"{name}: static dtypes"
    assert_outputs_like_fluid(name, got, want)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_rejects_what_fluid_rejects(name):
    want, got = ORACLE["errors"][name], run_error(fluid, name, ERRORS, FEEDS)
    assert_refuses_like_fluid(name, got, want, ERROR_DIFFERS)


def test_unnamed_persistables_are_named_as_in_fluid():
    assert persistable_names(fluid) == ORACLE["names"]


def test_unstack_gradient_with_unused_outputs():
    """fluid 1.8 fails to build unstack_grad when some outputs are unused (it looks for their
    @GRAD); spmd gives them zero gradient."""
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        x = fluid.data("x", [3, 4], "float32")
        x.stop_gradient = False
        row = fluid.layers.unstack(x, 0, 3)[2]
        (dx,) = fluid.backward.gradients(fluid.layers.reduce_sum(row * row), [x])
    (got,) = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": FEEDS["x"]}, fetch_list=[dx])
    want = np.zeros_like(FEEDS["x"])
    want[2] = 2 * FEEDS["x"][2]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_pool_size_zero_without_global_pooling_says_how_to_fix():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        img = fluid.data("img", [-1, 3, 8, 8], "float32")
        with pytest.raises(InvalidArgumentError, match="global_pooling=True"):
            fluid.layers.pool2d(img, 0, "avg")
