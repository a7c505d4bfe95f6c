"""Kernel: dpsgd, fluid 1.8's update of one parameter with differential privacy:

    scale = ||grad||_2 / clip when that norm is above clip, else 1  (the whole tensor's norm)
    param -= lr * (grad / scale + noise / batch_size)

with `noise` ONE Gaussian number (mean 0, std sigma) per op and step. With `seed` > 0 it is
fluid's number for that seed (fluid's kernel seeds std::minstd_rand with it at every run and
draws one polar Box-Muller sample: spmd.ops.optim_dpsgd.fluid_dpsgd_noise); with seed 0,
where fluid seeds from the wall clock, a fresh draw each step from the update ops' generator
(the same on every rank, so data-parallel replicas stay equal).
"""
from __future__ import annotations

import numpy as np

from ..ops.optim_dpsgd import fluid_dpsgd_noise
from .registry import kernel


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
