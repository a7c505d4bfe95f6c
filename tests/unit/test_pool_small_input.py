"""pool2d on a map smaller than its window, as fluid 1.8.5: the output size divides with C's
truncation toward zero, so (size - ksize) / stride in (-1, 0) still gives one output (the
model zoo's GoogLeNet and InceptionV4 on 64x64 images); 0 outputs stay an error. The values
below were printed by fluid 1.8.5 for the same program."""
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
