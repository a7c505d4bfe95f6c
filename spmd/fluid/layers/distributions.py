"""fluid.layers.distributions: fluid 1.8's probability distributions built from layers
(Uniform, Normal, Categorical, MultivariateNormalDiag): sample, entropy, log_prob and
kl_divergence append ops to the program, with fluid 1.8's formulas. Parameters are Variables,
or floats / lists / arrays (made into float32 tensors, broadcast together, as in fluid).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     logits = fluid.data("logits", [None, 3], "float32")
...     entropy = Categorical(logits).entropy()
>>> entropy.shape
(-1, 1)
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import layers as _spmd_layers
from ...core.variable import Variable
from ...errors import InvalidArgumentError

__all__ = ["Categorical", "MultivariateNormalDiag", "Normal", "Uniform"]


def _L():  # spmd's layer builders (fluid.layers' functions)
    return _spmd_layers


def _check(value, arg: str, where: str, kinds) -> None:
    if not isinstance(value, kinds):
        raise TypeError(f"The type of '{arg}' in {where} must be "
                        f"{' or '.join(k.__name__ for k in kinds)}, but received "
                        f"{type(value).__name__}")


class Distribution:
    """The base: parameters as Variables."""

    @staticmethod
    def _validate_args(*args) -> bool:
        """True when all are Variables; a mix of Variables and numbers is refused."""
        variables = [isinstance(a, Variable) for a in args]
        if any(variables) and not all(variables):
            raise ValueError("if one argument is Variable, all arguments should be Variable")
        return all(variables)

    @staticmethod
    def _to_variable(*args) -> tuple:
        arrays = []
        for arg in args:
            if isinstance(arg, float):
                arg = np.zeros(1) + arg
            array = np.array(arg)
            if array.dtype != np.float32:
                warnings.warn("data type of argument only support float32, your argument "
                              "will be convert to float32.", stacklevel=3)
                array = array.astype("float32")
            arrays.append(array)
        total = sum(arrays[1:], arrays[0])
        return tuple(_L().assign(np.ascontiguousarray(np.broadcast_arrays(a, total)[0]))
                     for a in arrays)


class Uniform(Distribution):
    """Uniform on [low, high)."""

    def __init__(self, low, high):
        for arg, value in (("low", low), ("high", high)):
            _check(value, arg, "Uniform", (float, np.ndarray, Variable, list))
        self.all_arg_is_float = isinstance(low, float) and isinstance(high, float)
        self.batch_size_unknown = self._validate_args(low, high)
        self.low, self.high = (low, high) if self.batch_size_unknown else self._to_variable(
            low, high)

    def sample(self, shape, seed=0):
        _check(shape, "shape", "sample", (list,))
        _check(seed, "seed", "sample", (int,))
        L = _L()
        batch_shape = list((self.low + self.high).shape)
        out_shape = shape + batch_shape
        if self.batch_size_unknown:
            zeros = L.fill_constant_batch_size_like(self.low + self.high, batch_shape + shape,
                                                    self.low.dtype, 0.0)
            unit = L.uniform_random_batch_size_like(zeros, list(zeros.shape), min=0.0,
                                                    max=1.0, seed=seed)
            return L.reshape(unit * (zeros + self.high - self.low) + self.low, out_shape)
        width = L.zeros(out_shape, dtype=self.low.dtype) + (self.high - self.low)
        out = L.uniform_random(out_shape, min=0.0, max=1.0, seed=seed) * width + self.low
        return L.reshape(out, shape) if self.all_arg_is_float else out

    def log_prob(self, value):
        _check(value, "value", "log_prob", (Variable,))
        L = _L()
        inside = (L.cast(L.less_than(self.low, value), value.dtype)
                  * L.cast(L.less_than(value, self.high), value.dtype))
        return L.log(inside) - L.log(self.high - self.low)

    def entropy(self):
        return _L().log(self.high - self.low)


class Normal(Distribution):
    """Normal(loc, scale)."""

    def __init__(self, loc, scale):
        for arg, value in (("loc", loc), ("scale", scale)):
            _check(value, arg, "Normal", (float, np.ndarray, Variable, list))
        self.all_arg_is_float = isinstance(loc, float) and isinstance(scale, float)
        self.batch_size_unknown = self._validate_args(loc, scale)
        self.loc, self.scale = (loc, scale) if self.batch_size_unknown else self._to_variable(
            loc, scale)

    def sample(self, shape, seed=0):
        _check(shape, "shape", "sample", (list,))
        _check(seed, "seed", "sample", (int,))
        L = _L()
        batch_shape = list((self.loc + self.scale).shape)
        out_shape = shape + batch_shape
        if self.batch_size_unknown:
            zeros = L.fill_constant_batch_size_like(self.loc + self.scale, batch_shape + shape,
                                                    self.loc.dtype, 0.0)
            unit = L.gaussian_random(L.shape(zeros), mean=0.0, std=1.0, seed=seed)
            return L.reshape(unit * (zeros + self.scale) + self.loc, out_shape)
        scale = L.zeros(out_shape, dtype=self.loc.dtype) + self.scale
        out = L.gaussian_random(out_shape, mean=0.0, std=1.0, seed=seed) * scale + self.loc
        return L.reshape(out, shape) if self.all_arg_is_float else out

    def entropy(self):
        L = _L()
        batch_shape = list((self.loc + self.scale).shape)
        zeros = L.fill_constant_batch_size_like(self.loc + self.scale, batch_shape,
                                                self.loc.dtype, 0.0)
        return 0.5 + 0.5 * math.log(2 * math.pi) + L.log(self.scale + zeros)

    def log_prob(self, value):
        _check(value, "value", "log_prob", (Variable,))
        L = _L()
        var = self.scale * self.scale
        return (-1.0 * ((value - self.loc) * (value - self.loc)) / (2.0 * var)
                - L.log(self.scale) - math.log(math.sqrt(2.0 * math.pi)))

    def kl_divergence(self, other):
        _check(other, "other", "kl_divergence", (Normal,))
        ratio = self.scale / other.scale
        ratio = ratio * ratio
        t1 = (self.loc - other.loc) / other.scale
        return 0.5 * (ratio + t1 * t1 - 1.0 - _L().log(ratio))


class Categorical(Distribution):
    """A categorical distribution over the last axis of `logits`."""

    def __init__(self, logits):
        _check(logits, "logits", "Categorical", (np.ndarray, Variable, list))
        self.logits = logits if self._validate_args(logits) else self._to_variable(logits)[0]

    def _centered(self):
        L = _L()
        logits = self.logits - L.reduce_max(self.logits, dim=-1, keep_dim=True)
        e = L.exp(logits)
        return logits, e, L.reduce_sum(e, dim=-1, keep_dim=True)

    def kl_divergence(self, other):
        _check(other, "other", "kl_divergence", (Categorical,))
        L = _L()
        logits, e, z = self._centered()
        other_logits, _, other_z = other._centered()
        prob = e / z
        return L.reduce_sum(prob * (logits - L.log(z) - other_logits + L.log(other_z)),
                            dim=-1, keep_dim=True)

    def entropy(self):
        L = _L()
        logits, e, z = self._centered()
        prob = e / z
        return -1.0 * L.reduce_sum(prob * (logits - L.log(z)), dim=-1, keep_dim=True)


class MultivariateNormalDiag(Distribution):
    """A multivariate normal with mean `loc` [k] and diagonal covariance `scale` [k, k]."""

    def __init__(self, loc, scale):
        for arg, value in (("loc", loc), ("scale", scale)):
            _check(value, arg, "MultivariateNormalDiag", (np.ndarray, Variable, list))
        if self._validate_args(loc, scale):
            self.loc, self.scale = loc, scale
        else:
            self.loc, self.scale = self._to_variable(loc, scale)
        if len(self.scale.shape) != 2 or self.scale.shape[0] <= 0:
            raise InvalidArgumentError(f"MultivariateNormalDiag: scale must be a known "
                                       f"[k, k] matrix, got shape {list(self.scale.shape)}")

    def _ones(self, value):
        L = _L()
        shape = list(value.shape)
        return (L.ones(shape=shape, dtype=self.loc.dtype),
                L.diag(L.ones(shape=[shape[0]], dtype=self.loc.dtype)))

    def _det(self, value):
        ones, eye = self._ones(value)
        return _L().reduce_prod(value + ones - eye)

    def _inv(self, value):
        ones, eye = self._ones(value)
        return _L().elementwise_pow(value, ones - 2 * eye)

    def entropy(self):
        k = self.scale.shape[0]
        return 0.5 * (k * (1.0 + math.log(2 * math.pi)) + _L().log(self._det(self.scale)))

    def kl_divergence(self, other):
        _check(other, "other", "kl_divergence", (MultivariateNormalDiag,))
        L = _L()
        trace = L.reduce_sum(self._inv(other.scale) * self.scale)
        diff = other.loc - self.loc
        quad = L.matmul(L.matmul(diff, self._inv(other.scale)), diff)
        k = self.scale.shape[0]
        ln_cov = L.log(self._det(other.scale)) - L.log(self._det(self.scale))
        return 0.5 * (trace + quad - k + ln_cov)
