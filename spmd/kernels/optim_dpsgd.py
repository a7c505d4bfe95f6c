"""Kernel: dpsgd, fluid 1.8's update of one parameter with differential privacy:

    scale = ||grad||_2 / clip when that norm is above clip, else 1  (the whole tensor's norm)
    param -= lr * (grad / scale + noise / batch_size)

with `noise` ONE Gaussian number (mean 0, std sigma) per op and step. With `seed` > 0 it is
fluid's number for that seed (fluid's kernel seeds std::minstd_rand with it at every run and
draws one polar Box-Muller sample: fluid_dpsgd_noise); with seed 0, where fluid seeds from the
wall clock, a fresh draw each step from the update ops' generator (the same on every rank, so
data-parallel replicas stay equal).
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel

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


@kernel("dpsgd", context=True)
def dpsgd(xp, ins, attrs, want, ctx):
    p, g = ins["Param"], ins["Grad"]
    t = np.dtype(p.dtype).type
    lr = t(float(ins["LearningRate"].reshape(-1)[0]))
    clip, batch, sigma = t(attrs["clip"]), t(attrs["batch_size"]), attrs["sigma"]
    norm = t(np.sqrt(float((g.astype(np.float64) ** 2).sum())))
    scale = t(norm / clip) if norm > clip else t(1)
    seed = attrs["seed"]
    if seed:
        noise = t(fluid_dpsgd_noise(seed, sigma, p.dtype))
    else:
        noise = t(ctx.rng.standard_normal() * sigma)
    return {"ParamOut": (p - lr * (g / scale + noise / batch)).astype(p.dtype)}
