"""docs/numpy.md (issue 22, item 7): the fact a numpy upper bound rests on. A fluid program's
own `[1]`-shaped array converts to a Python number (`"%.2f" % val`, `float(val)`) on numpy
below 2.4 (with a DeprecationWarning from 1.25) and is refused from numpy 2.4.0 on, whatever
runs the model; a fetched value reads as a number on every numpy (test_fetched_scalars.py)."""
from __future__ import annotations

import warnings

import numpy as np

NUMPY = tuple(int(part) for part in np.__version__.split(".")[:2])


def _converts(convert) -> bool:
    row = np.array([1.5], dtype="float32")  # one row of a program's stacked [N, 1] labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return convert(row) == "1.50"
        except TypeError as err:
            assert "only 0-dimensional arrays can be converted" in str(err)
            return False


def test_a_programs_own_one_element_array_converts_exactly_below_numpy_2_4():
    below = NUMPY < (2, 4)
    assert _converts(lambda row: "%.2f" % row) is below  # noqa: UP031 - the programs' spelling
    assert _converts(lambda row: f"{float(row):.2f}") is below


def test_the_idioms_docs_numpy_md_gives_work_on_every_numpy():
    row = np.array([1.5], dtype="float32")
    assert "%.2f" % row[0] == "1.50"  # noqa: UP031
    assert f"{row.item():.2f}" == "1.50"
    assert "%.2f" % np.mean(row) == "1.50"  # noqa: UP031
