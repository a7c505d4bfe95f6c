"""fluid.contrib.extend_optimizer.extend_with_decoupled_weight_decay(Optimizer): the optimizer
class with decoupled weight decay (AdamW-style): after the backward pass every parameter with a
gradient (and passing apply_decay_param_fun) becomes param - coeff * param, and the base
optimizer then updates that with the gradient of the undecayed parameter, as fluid 1.8 does.

>>> import spmd.fluid as fluid
>>> AdamW = extend_with_decoupled_weight_decay(fluid.optimizer.Adam)
>>> opt = AdamW(weight_decay=0.01, learning_rate=0.001)
"""
from __future__ import annotations

from ....core.operator import OpRole
from ....core.program import default_startup_program, program_guard
from ....core.variable import Variable
from ....optimizer.optimizer import Optimizer
from ... import layers

__all__ = ["extend_with_decoupled_weight_decay"]


class DecoupledWeightDecay:
    """The mixin: `coeff` a float or a Variable; `apply_decay_param_fun(name)` picks the
    parameters to decay (None: all with a gradient)."""

    def __init__(self, coeff=0.0, apply_decay_param_fun=None, **kwargs):
        if not isinstance(coeff, (float, Variable)):
            raise TypeError(f"coeff should be float or Variable, got {type(coeff).__name__}")
        self._params_name: set[str] = set()
        self._apply_decay_param_fun = apply_decay_param_fun
        self._coeff = coeff
        super().__init__(**kwargs)

    def _decayed(self, params_grads) -> list:
        if isinstance(self._coeff, float) and self._coeff == 0.0:
            return []
        chosen = []
        for param, grad in params_grads:
            if grad is None:
                continue
            if self._apply_decay_param_fun is not None and not self._apply_decay_param_fun(
                    param.name):
                continue
            if isinstance(self._coeff, Variable) and self._coeff.dtype != param.dtype:
                raise TypeError(f"the type of coeff ({self._coeff.dtype}) and parameter "
                                f"{param.name} ({param.dtype}) is not consistent")
            chosen.append(param)
        return chosen

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        params_grads = self.backward(loss, startup_program=startup_program,
                                     parameter_list=parameter_list, no_grad_set=no_grad_set)
        params = self._decayed(params_grads)
        program = loss.block.program
        startup = startup_program or default_startup_program()
        with program_guard(program, startup), program.role_guard(OpRole.OPTIMIZE):
            # every scaled copy is taken before any parameter changes, as in fluid
            scaled = [(p, p * self._coeff) for p in params]
            for param, decay in scaled:
                layers.assign(layers.elementwise_sub(x=param, y=decay), output=param)
                self._params_name.add(param.name)
        optimize_ops = self.apply_optimize(loss, startup_program, params_grads)
        return optimize_ops, params_grads

    def __str__(self):
        return " ".join(["Weight Decay, params:", ",".join(sorted(self._params_name))])


def extend_with_decoupled_weight_decay(base_optimizer):
    """The class `base_optimizer` with decoupled weight decay: construct it as
    `Cls(weight_decay, apply_decay_param_fun=None, **base_optimizer's keywords)`."""
    if not (isinstance(base_optimizer, type) and issubclass(base_optimizer, Optimizer)):
        raise TypeError("The input(base_optimizer) should be a derived class of Optimizer.")

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecay, base_optimizer):
        def __init__(self, weight_decay, apply_decay_param_fun=None, **kwargs):
            super().__init__(weight_decay, apply_decay_param_fun, **kwargs)

    OptimizerWithDecoupledWeightDecay.__name__ = (
        f"{base_optimizer.__name__}WithDecoupledWeightDecay")
    return OptimizerWithDecoupledWeightDecay
