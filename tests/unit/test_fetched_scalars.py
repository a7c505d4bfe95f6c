"""Issue 8, item 10: a fetched [1]-shaped loss reads as a Python number ("%f" % loss,
float(loss), "{:.4f}".format(loss)) under numpy 2.4, which refuses to convert ndim > 0 arrays,
while keeping fluid 1.x's shape [1] (loss[0], loss.shape, np.concatenate); a fetch of more
than one value says to index or reduce it."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid


def _fetch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        loss = fluid.layers.mean(x)
        pair = fluid.layers.reduce_sum(x, dim=0)
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed={"x": np.array([[0.5, 1.0], [1.5, 2.0]], "float32")},
                   fetch_list=[loss, pair], scope=fluid.Scope())


def test_a_one_value_fetch_reads_as_a_number_and_keeps_its_shape():
    loss, _ = _fetch()
    assert loss.shape == (1,) and loss[0] == np.float32(1.25)
    # the fluid programs' own spellings, on purpose
    assert "%f" % loss == "1.250000" and float(loss) == 1.25  # noqa: UP031
    assert "{:.4f}".format(loss) == "1.2500" and f"{loss:.1f}" == "1.2"  # noqa: UP032
    assert int(loss) == 1
    assert np.concatenate([loss, loss]).shape == (2,)
    assert type(np.asarray(loss)) is np.ndarray and repr(loss) == "array([1.25], dtype=float32)"


def test_a_fetch_of_several_values_says_to_index_it():
    _, pair = _fetch()
    with pytest.raises(TypeError, match=r"exactly one element, got shape \[2\].*value\[0\]"):
        float(pair)
