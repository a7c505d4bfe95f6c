"""fluid.optimizer.DpsgdOptimizer (Dpsgd): SGD with differential privacy (Abadi et al., CCS 2016),
one `dpsgd` op per parameter as fluid 1.8 appends it; its update and noise are in
spmd/kernels/optim_dpsgd.py:

    scale = max(||grad||_2 / clip, 1)                 (the whole gradient tensor's norm)
    param -= lr * (grad / scale + noise / batch_size)

where `noise` is ONE Gaussian number (mean 0, std sigma) per update op and step. fluid's kernel
seeds a std::minstd_rand engine at every run with the op's `seed` attribute, or with the wall
clock in seconds when it is 0 (the default; fluid's `_seed` is a debugging knob). spmd:
- `seed` > 0 (the `seed=` argument, or fluid's `opt._seed = n`): exactly fluid's number for that
  seed, the same every step, as in fluid;
- `seed` 0 / None: a fresh N(0, sigma) draw every step from the update ops' generator instead of
  fluid's one-per-wall-clock-second; under data parallelism every rank and place draws the same
  noise, so the replicas stay identical.

>>> opt = DpsgdOptimizer(learning_rate=0.01, clip=10.0, batch_size=16.0, sigma=1.0)
>>> # opt.minimize(avg_loss)
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from ..ops.optim_dpsgd import fluid_dpsgd_noise
from .optimizer import Optimizer, _is_number

__all__ = ["Dpsgd", "DpsgdOptimizer", "fluid_dpsgd_noise"]


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
        lr = self._create_param_lr(block, param)
        return block.append_op(
            "dpsgd", inputs={"Param": [param], "Grad": [grad], "LearningRate": [lr]},
            outputs={"ParamOut": [param]},
            attrs={"clip": self._clip, "batch_size": self._batch_size, "sigma": self._sigma,
                   "seed": self._seed or 0})


Dpsgd = DpsgdOptimizer
