"""Op definition: dpsgd, fluid 1.8's differentially private SGD update (one op per parameter,
as fluid's DpsgdOptimizer appends it; the formula is in spmd/kernels/optim_dpsgd.py), and the
noise fluid's kernel draws for a `seed` attribute > 0 (fluid_dpsgd_noise, here so that the
kernel and spmd.optimizer.dpsgd both read it)."""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .optim_common import check_same_shape, check_scalar
from .registry import define_op

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



@define_op("dpsgd", inputs=["Param", "Grad", "LearningRate"], outputs=["ParamOut"], grad=None,
           attrs={"clip": ("float", 10.0), "batch_size": ("float", 16.0),
                  "sigma": ("float", 1.0), "seed": ("int", 0)})
def _dpsgd(ctx):
    check_same_shape(ctx, "Grad")
    check_scalar(ctx, "LearningRate")
    ctx.check(ctx.attr("clip") > 0 and ctx.attr("batch_size") > 0 and ctx.attr("sigma") >= 0,
              f"needs clip > 0, batch_size > 0 and sigma >= 0, got clip={ctx.attr('clip')}, "
              f"batch_size={ctx.attr('batch_size')}, sigma={ctx.attr('sigma')}")
    ctx.set_output_like("ParamOut", "Param")
