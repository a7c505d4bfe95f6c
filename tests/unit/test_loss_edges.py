"""Loss edges against stored outputs of real fluid (PaddlePaddle 1.8.5,
tests/oracle/make_loss.py): softmax_with_cross_entropy's ignored rows (loss 0 as in fluid, a
zero gradient where fluid's CPU kernel gives the full one: a decision the layer documents),
and the out-of-range labels of bpr_loss and center_loss, named in the user's terms."""
from __future__ import annotations

import numpy as np
import pytest
from loss_oracle import ORACLE
from oracle.make_loss import CASES as ORACLE_CASES
from oracle.make_loss import FEEDS, run_case

import spmd.fluid as fluid


@pytest.mark.parametrize("name,ignore", [("ignore_index_swce", 0),
                                         ("ignore_index_swce_axis1", 1),
                                         ("ignore_index_swce_negative", -1)])
def test_softmax_with_cross_entropy_ignored_rows(name, ignore):
    """Loss 0 and the softmax as in fluid 1.8.5; the gradient as fluid's for the kept rows and
    zero for the ignored ones, where fluid's CPU kernel gives the full gradient (a decision,
    see the layer's docstring). With ignore_index -1 fluid also takes 1 from the previous
    row's last entry."""
    (loss, grad, softmax), = run_case(fluid, name)
    (want_loss, want_grad, want_softmax), = ORACLE[name]
    ignored = np.asarray(FEEDS[ORACLE_CASES[name][0]]["y"]) == ignore  # broadcasts along `axis`
    assert ignored.any()
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
    assert (loss[ignored] == 0).all()
    np.testing.assert_allclose(softmax, want_softmax, rtol=1e-5, atol=1e-6)
    rows = np.broadcast_to(ignored, grad.shape)
    if ignore < 0:
        # fluid's stray "- 1" (times the ignored row's loss gradient, make_loss's weight
        # 0.5 + (row % 7) / 7) lands on the entry before the ignored row
        row = int(np.flatnonzero(ignored)[0])
        before, stray = np.flatnonzero(rows)[0] - 1, 0.5 + (row % 7) / 7
        np.testing.assert_allclose(want_grad.flat[before], grad.flat[before] - stray,
                                   rtol=1e-5)
        want_grad = want_grad.copy()
        want_grad.flat[before] += stray
    np.testing.assert_allclose(grad[~rows], want_grad[~rows], rtol=1e-5, atol=1e-6)
    assert (grad[rows] == 0).all() and np.abs(want_grad[rows]).max() > 0.1


@pytest.mark.parametrize("layer", ["bpr_loss", "center_loss"])
@pytest.mark.parametrize("bad", [5, -1])
def test_out_of_range_label_is_named_in_the_users_terms(layer, bad):
    """fluid 1.8.5 refuses the id in bpr_loss (and crashes in center_loss); spmd names the id,
    its row and the valid range, and no internal ignore_index (neither op has one)."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [3, 4], "float32")
        y = fluid.data("y", [3, 1], "int64")
        if layer == "bpr_loss":
            out = fluid.layers.bpr_loss(x, y)
        else:
            out = fluid.layers.center_loss(x, y, 4, 0.1, fluid.ParamAttr(name="c"))
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.zeros((3, 4), "float32"), "y": np.array([[1], [bad], [0]], "int64")}
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        with pytest.raises(Exception) as info:
            exe.run(prog, feed=feed, fetch_list=[out])
    msg = str(info.value)
    assert f"{layer}: label holds class id {bad} at row 1, expected ids in [0, 4)" in msg
    assert "ignore_index" not in msg
