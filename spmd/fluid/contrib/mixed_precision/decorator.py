"""fluid.contrib.mixed_precision: decorate(optimizer, ...) and AutoMixedPrecisionLists.

spmd does not cast to float16: the decorated optimizer trains in the program's own dtype (the
numbers of float32 training), warning once that it does so. Its loss-scaling variable exists
(get_loss_scaling) and holds init_loss_scaling, but nothing is scaled: without float16 there is
no underflow to guard against, and scaling a float32 loss and unscaling its gradients would
only round them twice.

>>> import spmd.fluid as fluid
>>> opt = decorate(fluid.optimizer.SGD(0.1))
"""
from __future__ import annotations

import warnings

from ....core import unique_name
from ....layers.tensor import create_global_var

__all__ = ["AutoMixedPrecisionLists", "decorate"]  # as fluid 1.8's decorator module

_warned = False


class AutoMixedPrecisionLists:
    """Which ops would run in float16 (white), float32 (black) or either (gray); kept for the
    program's sake: spmd runs every op in the program's dtype."""

    def __init__(self, custom_white_list=None, custom_black_list=None,
                 custom_black_varnames=None):
        self.white_list = set(custom_white_list or ())
        self.black_list = set(custom_black_list or ())
        self.black_varnames = set(custom_black_varnames or ())
        both = self.white_list & self.black_list
        if both:
            raise ValueError(f"AutoMixedPrecisionLists: {sorted(both)} are in both the custom "
                             f"white list and the custom black list")


class OptimizerWithMixedPrecision:
    """What decorate() returns: minimize/backward/apply_gradients of the wrapped optimizer."""

    def __init__(self, optimizer, amp_lists, init_loss_scaling, use_dynamic_loss_scaling):
        self._optimizer = optimizer
        self._amp_lists = amp_lists or AutoMixedPrecisionLists()
        self._init_loss_scaling = float(init_loss_scaling)
        self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self._loss_scaling = None
        self._scaled_loss = None

    def get_loss_scaling(self):
        """The loss-scaling variable (holding init_loss_scaling; see the module doc)."""
        return self._loss_scaling

    def get_scaled_loss(self):
        """The loss minimize() differentiated (the loss itself: nothing is scaled)."""
        return self._scaled_loss

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None,
                 callbacks=None):
        self._prepare(loss)
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set,
                                        callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        self._prepare(loss)
        return self._optimizer.minimize(loss, startup_program=startup_program,
                                        parameter_list=parameter_list, no_grad_set=no_grad_set)

    def _prepare(self, loss):
        global _warned
        if not _warned:
            _warned = True
            warnings.warn("fluid.contrib.mixed_precision.decorate: spmd does not cast to "
                          "float16; the program trains in its own dtype (float32)", stacklevel=3)
        if self._loss_scaling is None:
            self._loss_scaling = create_global_var(
                shape=[1], value=self._init_loss_scaling, dtype="float32", persistable=True,
                name=unique_name.generate("loss_scaling"))
        self._scaled_loss = loss


def decorate(optimizer, amp_lists=None, init_loss_scaling=2 ** 15, incr_every_n_steps=1000,
             decr_every_n_nan_or_inf=2, incr_ratio=2.0, decr_ratio=0.8,
             use_dynamic_loss_scaling=True):
    """fluid 1.8's mixed-precision wrapper (see the module doc for what spmd does)."""
    return OptimizerWithMixedPrecision(optimizer, amp_lists, init_loss_scaling,
                                       use_dynamic_loss_scaling)
