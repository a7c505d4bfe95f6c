"""pool2d and conv2d on a map smaller than their window, as fluid 1.8.5: the output size
divides with C's truncation toward zero, so (size - ksize) / stride in (-1, 0) still gives one
output (the model zoo's GoogLeNet and InceptionV4 on 64x64 images), the window reading zeros
(conv) or nothing (pool) past the map; 0 outputs stay an error. The values below were printed
by fluid 1.8.5 for the same programs."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid

X = (np.arange(2 * 3 * 2 * 2, dtype="float32").reshape(2, 3, 2, 2) - 5) / 3
X1 = X[:, :, :1, :1].copy()

# (input, pool_size, pool_stride, pool_type, exclusive) -> fluid 1.8.5's output, shape [2, 3, 1, 1]
CASES = [
    (("x1", 7, 7, "avg", True), [-1.66667, -0.33333, 1.0, 2.33333, 3.66667, 5.0]),
    (("x1", 7, 7, "avg", False), [-0.03401, -0.0068, 0.02041, 0.04762, 0.07483, 0.10204]),
    (("x1", 7, 7, "max", True), [-1.66667, -0.33333, 1.0, 2.33333, 3.66667, 5.0]),
    (("x", 3, 2, "max", True), [-0.66667, 0.66667, 2.0, 3.33333, 4.66667, 6.0]),
    (("x", 3, 2, "avg", True), [-1.16667, 0.16667, 1.5, 2.83333, 4.16667, 5.5]),
    (("x", 3, 2, "avg", False), [-0.51852, 0.07407, 0.66667, 1.25926, 1.85185, 2.44444]),
]


@pytest.mark.parametrize("case,want", CASES, ids=[str(c) for c, _ in CASES])
def test_a_window_larger_than_the_map_gives_fluids_one_output(case, want):
    name, k, s, kind, exclusive = case
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name, [-1, 3, 1, 1] if name == "x1" else [-1, 3, 2, 2], "float32")
        out = fluid.layers.pool2d(x, pool_size=k, pool_stride=s, pool_type=kind,
                                  exclusive=exclusive)
    assert list(out.shape) == [-1, 3, 1, 1]
    got, = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={name: X1 if name == "x1" else X}, fetch_list=[out], scope=fluid.Scope())
    np.testing.assert_allclose(np.asarray(got).ravel(), want, atol=1e-5)


def test_no_output_at_all_is_still_refused():
    """(2 - 3) / 1 + 1 = 0: fluid 1.8.5 refuses it too."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3, 2, 2], "float32")
        with pytest.raises(ValueError, match="output spatial dim 0 would be 0"):
            fluid.layers.pool2d(x, pool_size=3, pool_stride=1)


W = (np.arange(4 * 3 * 3 * 3, dtype="float32").reshape(4, 3, 3, 3) % 7 - 3) / 5
# conv2d(x [2, 3, 2, 2], 4 filters 3x3) at (stride, padding): fluid 1.8.5's outputs, and the
# gradient w.r.t. x of the sum of all outputs squared
CONV_OUT = {
    (2, 0): [0.9333, 0.5333, 1.0667, 0.2, -0.6667, 0.5333, 2.6667, -2.2],
    (3, 1): [0.2, -1.6, -1.5333, 0.4, -2.2, -2.4, -0.7333, 2.8],
    (2, 1): [0.2, -1.6, -1.5333, 0.4, -2.2, -2.4, -0.7333, 2.8],
}
CONV_DX = [1.2, -1.2267, -7.76, 0.2667, -5.1467, -7.76, 7.92, 4.7467, 0.2667, 7.92, 1.2, -1.2267,
           -2.96, -6.3467, 0.88, 12.4267, -15.7067, 0.88, 14.64, -2.9333, 12.4267, 14.64, -2.96,
           -6.3467]


def test_a_kernel_larger_than_the_map_gives_fluids_output_and_gradient():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3, 2, 2], "float32")
        x.stop_gradient = False
        outs = [fluid.layers.conv2d(
            x, 4, 3, stride=s, padding=p, bias_attr=False,
            param_attr=fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(W)))
            for s, p in CONV_OUT]
        loss = fluid.layers.sum([fluid.layers.reduce_sum(o * o) for o in outs])
        dx, = fluid.backward.gradients([loss], [x])
    assert all(list(o.shape) == [-1, 4, 1, 1] for o in outs)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    *got, got_dx = exe.run(main, feed={"x": X}, fetch_list=outs + [dx], scope=scope)
    for value, want in zip(got, CONV_OUT.values()):
        np.testing.assert_allclose(np.asarray(value).ravel(), want, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got_dx).ravel(), CONV_DX, atol=1e-3)
