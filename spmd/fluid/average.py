"""fluid.average: WeightedAverage, a host-side running weighted mean (deprecated in fluid 1.8
for fluid.metrics.Accuracy; it says so when made).

>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     avg = WeightedAverage()
>>> avg.add(value=2.0, weight=1); avg.add(value=4.0, weight=3); avg.eval()
3.5
"""
from __future__ import annotations

import warnings

import numpy as np

__all__ = ["WeightedAverage"]


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) or (isinstance(v, np.ndarray) and v.shape == (1,))


class WeightedAverage:
    """add(value, weight) values (numbers or arrays), eval() their weighted mean."""

    def __init__(self):
        warnings.warn(f"The {type(self).__name__} is deprecated, please use "
                      f"fluid.metrics.Accuracy instead.", Warning, stacklevel=2)
        self.reset()

    def reset(self) -> None:
        self.numerator = None
        self.denominator = None

    def add(self, value, weight) -> None:
        if not (_is_number(value) or isinstance(value, np.ndarray)):
            raise ValueError("The 'value' must be a number(int, float) or a numpy ndarray.")
        if not _is_number(weight):
            raise ValueError("The 'weight' must be a number(int, float).")
        if self.numerator is None:
            self.numerator, self.denominator = value * weight, weight
        else:
            self.numerator += value * weight
            self.denominator += weight

    def eval(self):
        if self.numerator is None:
            raise ValueError("There is no data to be averaged in WeightedAverage.")
        return self.numerator / self.denominator
