"""paddle.nn.initializer (2.x names and argument names) over the fluid initializers.

>>> w = Normal(mean=0.0, std=0.02)
>>> # paddle.static.nn.fc(x, 10, weight_attr=paddle.ParamAttr(initializer=w))
"""
from __future__ import annotations

from .initializer import (
    ConstantInitializer,
    MSRAInitializer,
    NormalInitializer,
    TruncatedNormalInitializer,
    UniformInitializer,
    XavierInitializer,
)

__all__ = ["Constant", "KaimingNormal", "KaimingUniform", "Normal", "TruncatedNormal", "Uniform",
           "XavierNormal", "XavierUniform", "calculate_gain"]


class Constant(ConstantInitializer):
    """Fills with `value`."""

    def __init__(self, value: float = 0.0):
        super().__init__(value=value)


class Uniform(UniformInitializer):
    """Uniform in [low, high)."""

    def __init__(self, low: float = -1.0, high: float = 1.0, name: str | None = None):
        super().__init__(low=low, high=high, seed=0)


class Normal(NormalInitializer):
    """Gaussian with `mean` and standard deviation `std`."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, name: str | None = None):
        super().__init__(loc=mean, scale=std, seed=0)


class TruncatedNormal(TruncatedNormalInitializer):
    """Gaussian with `mean` and `std`, truncated at two standard deviations."""

    def __init__(self, mean: float = 0.0, std: float = 1.0, name: str | None = None):
        super().__init__(loc=mean, scale=std, seed=0)


class XavierUniform(XavierInitializer):
    """Uniform in +-sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, fan_in: float | None = None, fan_out: float | None = None,
                 name: str | None = None):
        super().__init__(uniform=True, fan_in=fan_in, fan_out=fan_out, seed=0)


class XavierNormal(XavierInitializer):
    """Normal with std sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, fan_in: float | None = None, fan_out: float | None = None,
                 name: str | None = None):
        super().__init__(uniform=False, fan_in=fan_in, fan_out=fan_out, seed=0)


class KaimingUniform(MSRAInitializer):
    """Uniform in +-gain*sqrt(3 / fan_in); gain sqrt(2) for relu."""

    def __init__(self, fan_in: float | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu", name: str | None = None):
        super().__init__(uniform=True, fan_in=fan_in, seed=0, negative_slope=negative_slope,
                         nonlinearity=nonlinearity)


class KaimingNormal(MSRAInitializer):
    """Normal with std gain/sqrt(fan_in); gain sqrt(2) for relu."""

    def __init__(self, fan_in: float | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu", name: str | None = None):
        super().__init__(uniform=False, fan_in=fan_in, seed=0, negative_slope=negative_slope,
                         nonlinearity=nonlinearity)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain of `nonlinearity` (param: leaky_relu's negative slope, default
    0.01 as paddle).

    >>> round(calculate_gain("tanh"), 4)
    1.6667
    """
    from .initializer import _gain

    return _gain(nonlinearity, 0.01 if param is None else float(param))
