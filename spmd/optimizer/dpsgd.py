"""fluid.optimizer.DpsgdOptimizer (Dpsgd): SGD with differential privacy (Abadi et al., CCS 2016),
with fluid 1.8's update for each parameter:

    scale = max(||grad||_2 / clip, 1)                 (the whole gradient tensor's norm)
    param -= lr * (grad / scale + noise / batch_size)

where `noise` is ONE Gaussian number (mean 0, std sigma) per update op and step, shared by all
of the parameter's elements, as in fluid's dpsgd kernel.

The noise. fluid's kernel seeds a std::minstd_rand engine at every run with the op's `seed`
attribute, or with the wall clock in seconds when it is 0 (the default; fluid's `_seed` is a
debugging knob), and draws one polar Box-Muller sample. spmd:
- `seed` > 0 (the `seed=` argument, or fluid's `opt._seed = n`): exactly fluid's number for that
  seed (the same engine and draw, computed here once, in float32), the same every step, as in
  fluid;
- `seed` 0 / None: a fresh N(0, sigma) draw every step from the program's random generator (a
  `gaussian_random` op), instead of fluid's one-per-wall-clock-second. Under data parallelism
  every rank and place draws the same noise (update ops draw from a generator seeded alike
  everywhere, see spmd/executor/parallel.py), so the replicas stay identical.

spmd builds the update from its existing ops (squared_l2_norm, sqrt, scale, elementwise_max,
elementwise_div, elementwise_add, sgd) rather than one `dpsgd` op; the numbers are fluid's to
float32 rounding.

>>> opt = DpsgdOptimizer(learning_rate=0.01, clip=10.0, batch_size=16.0, sigma=1.0)
>>> # opt.minimize(avg_loss)
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .common import tmp_var
from .optimizer import Optimizer, _is_number

__all__ = ["Dpsgd", "DpsgdOptimizer", "fluid_dpsgd_noise"]

_MINSTD_MOD = 2147483647  # std::minstd_rand: x' = 48271 * x mod (2^31 - 1)
_MINSTD_MUL = 48271


def fluid_dpsgd_noise(seed: int, sigma: float, dtype="float32") -> float:
    """The Gaussian number fluid 1.8's dpsgd kernel adds (before dividing by batch_size) when
    its seed is `seed` > 0: minstd_rand seeded with `seed`, uniforms as libstdc++'s
    generate_canonical makes them, one polar Box-Muller draw, times sigma, in `dtype`.

    >>> round(fluid_dpsgd_noise(5, 1.0), 4)
    -0.1994
    """
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed <= 0:
        raise InvalidArgumentError(f"fluid_dpsgd_noise: seed must be an int > 0, got {seed!r}")
    t = np.dtype(dtype).type
    state = int(seed) % _MINSTD_MOD or 1
    span = float(_MINSTD_MOD - 1)  # the engine's max - min + 1
    draws = 1 if np.dtype(dtype).itemsize <= 4 else 2  # bits needed / 30 bits per draw

    def uniform():
        nonlocal state
        total, power = t(0), t(1)
        for _ in range(draws):
            state = state * _MINSTD_MUL % _MINSTD_MOD
            total = t(total + t(state - 1) * power)
            power = t(power * t(span))
        value = t(total / power)
        return value if value < 1 else np.nextafter(t(1), t(0))

    while True:
        v1 = t(2) * uniform() - t(1)
        v2 = t(2) * uniform() - t(1)
        s = t(v1 * v1 + v2 * v2)
        if 0 < s < 1:
            break
    x = t(v1 * np.sqrt(t(-2) * np.log(s) / s))
    return float(t(x * t(sigma)))


class DpsgdOptimizer(Optimizer):
    """Differentially private SGD (fluid.optimizer.Dpsgd): see the module docstring for the
    update and the noise. `seed` (an spmd extension; fluid has the attribute `_seed`) fixes the
    noise to fluid's number for that seed.

    >>> opt = DpsgdOptimizer(learning_rate=0.01, clip=10.0, batch_size=16.0, sigma=1.0, seed=5)
    """

    type = "dpsgd"

    def __init__(self, learning_rate=0.001, clip=0.9, batch_size=0.999, sigma=1e-8,
                 parameter_list=None, seed=None):
        super().__init__(learning_rate, parameter_list)
        where = type(self).__name__
        for arg, value in (("clip", clip), ("batch_size", batch_size), ("sigma", sigma)):
            if not _is_number(value):
                raise InvalidArgumentError(f"{where}: {arg} must be a float, got {value!r}")
        if clip <= 0 or batch_size <= 0 or sigma < 0:
            raise InvalidArgumentError(
                f"{where}: needs clip > 0, batch_size > 0 and sigma >= 0, got clip={clip}, "
                f"batch_size={batch_size}, sigma={sigma} (the gradient is divided by "
                "norm/clip and the noise by batch_size)")
        self._clip, self._batch_size, self._sigma = float(clip), float(batch_size), float(sigma)
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)
                                 or not 0 <= seed < 2 ** 31):
            raise InvalidArgumentError(
                f"{where}: seed must be None or an int in [0, 2**31), got {seed!r}")
        self._seed = seed  # fluid's name: scripts that debug with `opt._seed = n` keep working

    def _append_optimize_op(self, block, param, grad):
        dtype = grad.dtype
        norm_sq = tmp_var(block, f"{param.name}_dpsgd_norm_sq", [1], dtype)
        block.append_op("squared_l2_norm", inputs={"X": [grad]}, outputs={"Out": [norm_sq]})
        norm = tmp_var(block, f"{param.name}_dpsgd_norm", [1], dtype)
        block.append_op("sqrt", inputs={"X": [norm_sq]}, outputs={"Out": [norm]})
        ratio = tmp_var(block, f"{param.name}_dpsgd_ratio", [1], dtype)
        block.append_op("scale", inputs={"X": [norm]}, outputs={"Out": [ratio]},
                        attrs={"scale": 1.0 / self._clip})
        one = self._constant(block, f"{param.name}_dpsgd_one", 1.0, dtype)
        # fluid divides by norm/clip only when norm > clip: max(norm/clip, 1) is the same
        factor = tmp_var(block, f"{param.name}_dpsgd_scale", [1], dtype)
        block.append_op("elementwise_max", inputs={"X": [ratio], "Y": [one]},
                        outputs={"Out": [factor]})
        clipped = tmp_var(block, f"{grad.name}_dpsgd_clipped", grad.shape, dtype)
        block.append_op("elementwise_div", inputs={"X": [grad], "Y": [factor]},
                        outputs={"Out": [clipped]}, attrs={"axis": -1})
        noisy = tmp_var(block, f"{grad.name}_dpsgd_noisy", grad.shape, dtype)
        block.append_op("elementwise_add",
                        inputs={"X": [clipped], "Y": [self._noise(block, param, dtype)]},
                        outputs={"Out": [noisy]}, attrs={"axis": -1})
        lr = self._create_param_lr(block, param)
        return block.append_op("sgd", inputs={"Param": [param], "Grad": [noisy],
                                              "LearningRate": [lr]},
                               outputs={"ParamOut": [param]})

    def _noise(self, block, param, dtype):
        """noise / batch_size, a [1] variable: fluid's number for a fixed seed, else a fresh
        draw each step."""
        seed = self._seed or 0
        if seed:
            t = np.dtype(dtype).type
            value = t(fluid_dpsgd_noise(seed, self._sigma, dtype)) / t(self._batch_size)
            return self._constant(block, f"{param.name}_dpsgd_noise", float(value), dtype)
        drawn = tmp_var(block, f"{param.name}_dpsgd_gauss", [1], dtype)
        block.append_op("gaussian_random", outputs={"Out": [drawn]},
                        attrs={"shape": [1], "mean": 0.0, "std": self._sigma, "seed": 0,
                               "dtype": dtype})
        scaled = tmp_var(block, f"{param.name}_dpsgd_noise", [1], dtype)
        block.append_op("scale", inputs={"X": [drawn]}, outputs={"Out": [scaled]},
                        attrs={"scale": 1.0 / self._batch_size})
        return scaled

    @staticmethod
    def _constant(block, key, value, dtype):
        var = tmp_var(block, key, [1], dtype)
        block.append_op("fill_constant", outputs={"Out": [var]},
                        attrs={"shape": [1], "value": float(value), "dtype": dtype})
        return var


Dpsgd = DpsgdOptimizer
