"""Initializers (fluid.initializer): each one prepends the op that fills a variable to a block
of the startup program: fill_constant, uniform_random, gaussian_random or
truncated_gaussian_random.

Seeds: an initializer's non-zero `seed` makes its op draw from a generator of its own. With
`seed=0` (the default) the op draws from the executor's generator for the program, which the
program's `random_seed` seeds, so `startup_program.random_seed = 1` makes initial values
reproducible. This departs from fluid 1.8 on purpose: fluid copies `random_seed` into every
init op, so all parameters of one shape start with equal values; here they are distinct.

>>> init = Xavier(uniform=False)
>>> # fc(x, size=10, param_attr=ParamAttr(initializer=init))
"""
from __future__ import annotations

import math

from ..core.dtypes import is_floating
from ..errors import InvalidArgumentError

__all__ = [
    "Constant", "ConstantInitializer", "Initializer", "MSRA", "MSRAInitializer", "Normal",
    "NormalInitializer", "TruncatedNormal", "TruncatedNormalInitializer", "Uniform",
    "UniformInitializer", "Xavier", "XavierInitializer",
]


def _check_number(owner: str, name: str, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{owner}({name}=...) expects a number, got {value!r}")
    return float(value)


def _check_seed(owner: str, seed):
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgumentError(f"{owner}(seed=...) expects an int >= 0, got {seed!r}")
    return seed


class Initializer:
    """Base class: `init(var, block)` prepends the op that initializes `var` to `block` (a block
    of the startup program) and returns it."""

    # the name fluid gives the float32 stand-in of a float16 variable ("<prefix>.<var>.tmp")
    _FP16_TMP_PREFIX = "init"

    def __call__(self, var, block):
        """Prepend the op initializing `var`. A float16 variable is initialized as fluid 1.8
        does it: the op fills a float32 stand-in, and a `cast` appended to the block writes
        it into the variable (two ops)."""
        if var.dtype != "float16":
            return self._init(var, block)
        from ..core import unique_name

        stand_in = block.create_var(
            name=unique_name.generate(f"{self._FP16_TMP_PREFIX}.{var.name}.tmp"),
            shape=var.shape, dtype="float32", persistable=False)
        op = self._init(stand_in, block)
        block.append_op("cast", inputs={"X": [stand_in]}, outputs={"Out": [var]},
                        attrs={"in_dtype": "float32", "out_dtype": "float16"})
        return op

    def _init(self, var, block):
        """The op initializing `var` (what each initializer defines)."""
        raise NotImplementedError(f"{type(self).__name__} defines no _init(var, block)")

    @staticmethod
    def _compute_fans(var) -> tuple[int, int]:
        """fan_in, fan_out as fluid estimates them: [in, out] for matrices,
        [out_channels, in_channels, *kernel] for conv filters."""
        shape = tuple(var.shape)
        if not shape:
            return 1, 1
        if len(shape) == 1:
            return shape[0], shape[0]
        if len(shape) == 2:
            return shape[0], shape[1]
        receptive = math.prod(shape[2:])
        return shape[1] * receptive, shape[0] * receptive

    def _seed(self, block) -> int:
        return self._seed_value  # 0: the program's generator, seeded by random_seed

    def _random_op(self, var, block, op_type: str, attrs: dict):
        if not is_floating(var.dtype):
            raise InvalidArgumentError(
                f"{type(self).__name__} cannot initialize '{var.name}' of dtype {var.dtype}: "
                f"{op_type} makes floating-point values; use Constant for integer variables")
        attrs = dict(attrs, shape=list(var.shape), dtype=var.dtype, seed=self._seed(block))
        return block._prepend_op(op_type, outputs={"Out": [var]}, attrs=attrs)


class ConstantInitializer(Initializer):
    """Fills with `value` (fill_constant).

    >>> ConstantInitializer(value=1.0)
    ConstantInitializer(value=1.0)
    """

    _FP16_TMP_PREFIX = "constant_init"

    def __init__(self, value: float = 0.0, force_cpu: bool = False):
        self.value = _check_number("Constant", "value", value)
        self.force_cpu = bool(force_cpu)

    def _init(self, var, block):
        return block._prepend_op("fill_constant", outputs={"Out": [var]},
                                 attrs={"shape": list(var.shape), "dtype": var.dtype,
                                        "value": self.value, "force_cpu": self.force_cpu})

    def __repr__(self):
        return f"ConstantInitializer(value={self.value})"


class UniformInitializer(Initializer):
    """Uniform in [low, high) (uniform_random).

    >>> UniformInitializer(low=-0.5, high=0.5).high
    0.5
    """

    _FP16_TMP_PREFIX = "uniform_random"

    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0):
        self.low = _check_number("Uniform", "low", low)
        self.high = _check_number("Uniform", "high", high)
        if self.high < self.low:
            raise InvalidArgumentError(
                f"Uniform(low={low}, high={high}): high must be >= low")
        self._seed_value = _check_seed("Uniform", seed)

    def _init(self, var, block):
        return self._random_op(var, block, "uniform_random", {"min": self.low, "max": self.high})

    def __repr__(self):
        return f"UniformInitializer(low={self.low}, high={self.high}, seed={self._seed_value})"


class NormalInitializer(Initializer):
    """Gaussian with mean `loc` and standard deviation `scale` (gaussian_random).

    >>> NormalInitializer(loc=0.0, scale=2.0).scale
    2.0
    """

    _FP16_TMP_PREFIX = "gaussian_random"

    _op = "gaussian_random"

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0):
        self.loc = _check_number(type(self).__name__, "loc", loc)
        self.scale = _check_number(type(self).__name__, "scale", scale)
        if self.scale < 0:
            raise InvalidArgumentError(f"{type(self).__name__}(scale={scale}): must be >= 0")
        self._seed_value = _check_seed(type(self).__name__, seed)

    def _init(self, var, block):
        return self._random_op(var, block, self._op, {"mean": self.loc, "std": self.scale})

    def __repr__(self):
        return (f"{type(self).__name__}(loc={self.loc}, scale={self.scale}, "
                f"seed={self._seed_value})")


class TruncatedNormalInitializer(NormalInitializer):
    """Gaussian truncated at two standard deviations (truncated_gaussian_random)."""

    _FP16_TMP_PREFIX = "truncated_gaussian_random"

    _op = "truncated_gaussian_random"


class XavierInitializer(Initializer):
    """Glorot/Xavier: uniform in +-sqrt(6 / (fan_in + fan_out)), or normal with std
    sqrt(2 / (fan_in + fan_out)). Fans default to the variable's shape (see _compute_fans).

    >>> XavierInitializer(uniform=False, fan_in=4, fan_out=4).uniform
    False
    """

    _FP16_TMP_PREFIX = "xavier_init"

    def __init__(self, uniform: bool = True, fan_in: float | None = None,
                 fan_out: float | None = None, seed: int = 0):
        self.uniform = bool(uniform)
        self.fan_in = None if fan_in is None else _check_number("Xavier", "fan_in", fan_in)
        self.fan_out = None if fan_out is None else _check_number("Xavier", "fan_out", fan_out)
        self._seed_value = _check_seed("Xavier", seed)

    def _init(self, var, block):
        f_in, f_out = self._compute_fans(var)
        fan_in = f_in if self.fan_in is None else self.fan_in
        fan_out = f_out if self.fan_out is None else self.fan_out
        if fan_in + fan_out <= 0:
            raise InvalidArgumentError(
                f"Xavier: fan_in + fan_out must be > 0 for '{var.name}', got {fan_in}+{fan_out}")
        if self.uniform:
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            return self._random_op(var, block, "uniform_random", {"min": -limit, "max": limit})
        std = math.sqrt(2.0 / (fan_in + fan_out))
        return self._random_op(var, block, "gaussian_random", {"mean": 0.0, "std": std})

    def __repr__(self):
        return f"XavierInitializer(uniform={self.uniform}, seed={self._seed_value})"


def _gain(nonlinearity: str, negative_slope: float) -> float:
    """Recommended gain of a nonlinearity (paddle.nn.initializer.calculate_gain)."""
    gains = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0, "sigmoid": 1.0,
             "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0),
             "leaky_relu": math.sqrt(2.0 / (1.0 + negative_slope ** 2)), "selu": 3.0 / 4.0}
    if nonlinearity not in gains:
        raise InvalidArgumentError(
            f"nonlinearity={nonlinearity!r} is not one of {sorted(gains)}")
    return gains[nonlinearity]


class MSRAInitializer(Initializer):
    """He/Kaiming: uniform in +-gain*sqrt(3 / fan_in), or normal with std gain/sqrt(fan_in);
    gain sqrt(2) for relu (fluid 1.8's only case), so +-sqrt(6 / fan_in) and sqrt(2 / fan_in).

    >>> MSRAInitializer(uniform=False).uniform
    False
    """

    _FP16_TMP_PREFIX = "masra_init"  # fluid 1.8 spells it so

    def __init__(self, uniform: bool = True, fan_in: float | None = None, seed: int = 0,
                 negative_slope: float = 0.0, nonlinearity: str = "relu"):
        self.uniform = bool(uniform)
        self.fan_in = None if fan_in is None else _check_number("MSRA", "fan_in", fan_in)
        self._seed_value = _check_seed("MSRA", seed)
        self.gain = _gain(nonlinearity, _check_number("MSRA", "negative_slope", negative_slope))

    def _init(self, var, block):
        fan_in = self._compute_fans(var)[0] if self.fan_in is None else self.fan_in
        if fan_in <= 0:
            raise InvalidArgumentError(f"MSRA: fan_in must be > 0 for '{var.name}', got {fan_in}")
        if self.uniform:
            limit = self.gain * math.sqrt(3.0 / fan_in)
            return self._random_op(var, block, "uniform_random", {"min": -limit, "max": limit})
        std = self.gain / math.sqrt(fan_in)
        return self._random_op(var, block, "gaussian_random", {"mean": 0.0, "std": std})

    def __repr__(self):
        return f"MSRAInitializer(uniform={self.uniform}, seed={self._seed_value})"


# fluid's short aliases
Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
TruncatedNormal = TruncatedNormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
