"""A hard label declared float32 (fluid.layers.data) and fed int64 class ids: fluid 1.8
checks neither the label's dtype at build nor the feed's, and its kernels run on the ids
as fed (Paddle's test_static_save_load). spmd converts the feed to the variable's float32
and its kernels take the whole-number floats as the ids: the losses and gradients are those
of an int64 label."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError

LOGITS = np.random.default_rng(3).standard_normal((6, 5)).astype("float32")
IDS = np.array([[1], [4], [0], [2], [2], [3]], "int64")


def _run(label_dtype, label_value):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[-1, 5], dtype="float32")
        x.stop_gradient = False
        y = fluid.layers.data("y", shape=[-1, 1], dtype=label_dtype)
        swce = fluid.layers.softmax_with_cross_entropy(logits=x, label=y)
        ce = fluid.layers.cross_entropy(fluid.layers.softmax(x), label=y)
        loss = fluid.layers.mean(swce) + fluid.layers.mean(ce)
        fluid.backward.append_backward(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=fluid.Scope())
    return [np.asarray(v) for v in exe.run(main, feed={"x": LOGITS, "y": label_value},
                                            fetch_list=[swce, ce, "x@GRAD"],
                                            scope=fluid.Scope())]


def test_a_float_label_fed_int64_ids_gives_the_int64_labels_losses_and_gradient():
    want = _run("int64", IDS)
    got = _run("float32", IDS)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    shifted = LOGITS - LOGITS.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    expected = -log_softmax[np.arange(6), IDS[:, 0]].reshape(6, 1)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5)
    np.testing.assert_allclose(got[1], expected, rtol=1e-4)


def test_a_float_label_with_fractions_is_refused_naming_the_fix():
    with pytest.raises(ExecutionError, match="Label is float32 with fractional values.*int64"):
        _run("float32", IDS.astype("float32") + 0.5)
