"""fluid 1.8's adaptive optimizers: Adagrad, DecayedAdagrad, RMSProp, Adadelta, Adamax, Ftrl,
Lamb and LarsMomentum, with fluid's arguments, defaults and accumulator names.

Each appends one update op per parameter (formulas in spmd/kernels/optim_adaptive.py); the
pipeline around it (clipping, regularization, learning-rate variable) is the base Optimizer's.

>>> opt = RMSPropOptimizer(learning_rate=0.01, momentum=0.9, centered=True)
>>> # opt.minimize(avg_loss)
"""
from __future__ import annotations

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .optimizer import AdamOptimizer, Optimizer, _is_number

__all__ = ["Adadelta", "AdadeltaOptimizer", "Adagrad", "AdagradOptimizer", "Adamax",
           "AdamaxOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer", "Ftrl",
           "FtrlOptimizer", "Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer",
           "RMSProp", "RMSPropOptimizer"]


def _floats(where: str, **values) -> list[float]:
    """Each value as a float, or an error naming the argument."""
    out = []
    for arg, value in values.items():
        if not _is_number(value):
            raise InvalidArgumentError(f"{where}: {arg} must be a float, got {value!r}")
        out.append(float(value))
    return out


class _StateOptimizer(Optimizer):
    """An optimizer whose op reads Param, Grad, (LearningRate) and per-parameter accumulators
    and writes them back: `_state` lists (input slot, output slot, accumulator name, fill)."""

    _state: tuple = ()
    _uses_lr = True

    def _create_accumulators(self, main, startup, parameters):
        for p in parameters:
            for _, _, acc, fill in self._state:
                self._add_accumulator(main, startup, acc, p, fill_value=self._fill(fill))

    def _fill(self, fill):
        return getattr(self, fill) if isinstance(fill, str) else fill

    def _attrs(self, param) -> dict:
        raise NotImplementedError

    def _extra_inputs(self, program, param) -> dict:
        """Hook: inputs the op reads but does not write (Adamax's beta1 power)."""
        return {}

    def _append_optimize_op(self, block, param, grad):
        prog = block.program
        inputs = {"Param": [param], "Grad": [grad]}
        outputs = {"ParamOut": [param]}
        for in_slot, out_slot, acc, _ in self._state:
            var = self._get_accumulator(prog, acc, param)
            inputs[in_slot] = [var]
            outputs[out_slot] = [var]
        if self._uses_lr:
            inputs["LearningRate"] = [self._create_param_lr(block, param)]
        inputs.update(self._extra_inputs(prog, param))
        return block.append_op(self.type, inputs=inputs, outputs=outputs,
                               attrs=self._attrs(param))


class AdagradOptimizer(_StateOptimizer):
    """moment += grad**2;  param -= lr * grad / (sqrt(moment) + epsilon).

    >>> opt = AdagradOptimizer(learning_rate=0.2, initial_accumulator_value=0.1)
    """

    type = "adagrad"
    _moment_acc_str = "moment"  # fluid's accumulator-name attributes (its tests read them)
    _state = (("Moment", "MomentOut", "moment", "initial_accumulator_value"),)

    def __init__(self, learning_rate, epsilon=1.0e-6, parameter_list=None, regularization=None,
                 grad_clip=None, name=None, initial_accumulator_value=0.0):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._epsilon, self.initial_accumulator_value = _floats(
            type(self).__name__, epsilon=epsilon,
            initial_accumulator_value=initial_accumulator_value)

    def _attrs(self, param):
        return {"epsilon": self._epsilon}


class DecayedAdagradOptimizer(_StateOptimizer):
    """moment = decay * moment + (1 - decay) * grad**2;
    param -= lr * grad / (sqrt(moment) + epsilon).

    >>> opt = DecayedAdagradOptimizer(learning_rate=0.2, decay=0.95)
    """

    type = "decayed_adagrad"
    _moment_acc_str = "moment"
    _state = (("Moment", "MomentOut", "moment", 0.0),)

    def __init__(self, learning_rate, decay=0.95, epsilon=1.0e-6, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._decay, self._epsilon = _floats(type(self).__name__, decay=decay, epsilon=epsilon)

    def _attrs(self, param):
        return {"epsilon": self._epsilon, "decay": self._decay}


class RMSPropOptimizer(_StateOptimizer):
    """mean_square = rho * mean_square + (1 - rho) * grad**2 (centered: minus the square of the
    running mean gradient under the root); momentum = momentum * momentum_acc +
    lr * grad / sqrt(mean_square + epsilon); param -= momentum_acc.

    >>> opt = RMSPropOptimizer(learning_rate=0.1, rho=0.95, momentum=0.9, centered=True)
    """

    type = "rmsprop"
    _momentum_acc_str, _mean_square_acc_str, _mean_grad_acc_str = (
        "momentum", "mean_square", "mean_grad")
    _state = (("Moment", "MomentOut", "momentum", 0.0),
              ("MeanSquare", "MeanSquareOut", "mean_square", 0.0),
              ("MeanGrad", "MeanGradOut", "mean_grad", 0.0))

    def __init__(self, learning_rate, rho=0.95, epsilon=1.0e-6, momentum=0.0, centered=False,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._rho, self._epsilon, self._momentum = _floats(
            type(self).__name__, rho=rho, epsilon=epsilon, momentum=momentum)
        self._centered = bool(centered)

    def _attrs(self, param):
        return {"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
                "centered": self._centered}


class AdadeltaOptimizer(_StateOptimizer):
    """fluid 1.8's Adadelta: the step is sqrt((E[dx^2] + eps) / (E[g^2] + eps)) * grad, with
    running averages of squared gradients and squared updates; the learning rate is accepted
    but, as in fluid 1.8's adadelta op, not used.

    >>> opt = AdadeltaOptimizer(learning_rate=0.0003, epsilon=1.0e-6, rho=0.95)
    """

    type = "adadelta"
    _avg_squared_grad_acc_str = "_avg_squared_grad"
    _avg_squared_update_acc_str = "_avg_squared_update"
    _uses_lr = False
    _state = (("AvgSquaredGrad", "AvgSquaredGradOut", "_avg_squared_grad", 0.0),
              ("AvgSquaredUpdate", "AvgSquaredUpdateOut", "_avg_squared_update", 0.0))

    def __init__(self, learning_rate, epsilon=1.0e-6, rho=0.95, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._epsilon, self._rho = _floats(type(self).__name__, epsilon=epsilon, rho=rho)

    def _attrs(self, param):
        return {"epsilon": self._epsilon, "rho": self._rho}


class AdamaxOptimizer(_StateOptimizer):
    """Adam with the infinity norm: moment = beta1 * moment + (1 - beta1) * grad;
    inf_norm = max(beta2 * inf_norm + epsilon, |grad|);
    param -= lr / (1 - beta1**t) * moment / inf_norm.

    >>> opt = AdamaxOptimizer(learning_rate=0.2)
    """

    type = "adamax"
    _moment_acc_str, _inf_norm_acc_str, _beta1_pow_acc_str = (
        "moment", "inf_norm", "beta1_pow_acc")
    _state = (("Moment", "MomentOut", "moment", 0.0),
              ("InfNorm", "InfNormOut", "inf_norm", 0.0))

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._beta1, self._beta2, self._epsilon = _floats(
            type(self).__name__, beta1=beta1, beta2=beta2, epsilon=epsilon)

    def _create_accumulators(self, main, startup, parameters):
        super()._create_accumulators(main, startup, parameters)
        for p in parameters:
            self._add_accumulator(main, startup, "beta1_pow_acc", p, fill_value=self._beta1,
                                  shape=[1])

    def _extra_inputs(self, program, param):
        # an input only: the power advances once all updates are done (_finish_update)
        return {"Beta1Pow": [self._get_accumulator(program, "beta1_pow_acc", param)]}

    def _finish_update(self, block, params_grads):
        for param, _ in params_grads:
            beta1_pow = self._get_accumulator(block.program, "beta1_pow_acc", param)
            block.append_op("scale", inputs={"X": [beta1_pow]}, outputs={"Out": [beta1_pow]},
                            attrs={"scale": self._beta1})

    def _attrs(self, param):
        return {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}


class FtrlOptimizer(_StateOptimizer):
    """FTRL-Proximal (McMahan et al.), with fluid 1.8's op (see the ftrl kernel).

    Note: fluid 1.8's FtrlOptimizer passes `l1` as the op's l2 attribute too (its
    `"l2": self._l1`); spmd builds the same program, so `l2` has no effect, as in fluid 1.8.

    >>> opt = FtrlOptimizer(learning_rate=0.1, l1=0.01, l2=0.01)
    """

    type = "ftrl"
    _squared_acc_str, _linear_acc_str = "squared", "linear"
    _state = (("SquaredAccumulator", "SquaredAccumOut", "squared", 0.0),
              ("LinearAccumulator", "LinearAccumOut", "linear", 0.0))

    def __init__(self, learning_rate, l1=0.0, l2=0.0, lr_power=-0.5, parameter_list=None,
                 regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._l1, self._l2, self._lr_power = _floats(type(self).__name__, l1=l1, l2=l2,
                                                     lr_power=lr_power)

    def _attrs(self, param):
        return {"l1": self._l1, "l2": self._l1, "lr_power": self._lr_power}


class LarsMomentumOptimizer(_StateOptimizer):
    """Momentum with a layer-wise learning rate (LARS):
    local_lr = lr * lars_coeff * ||param|| / (||grad|| + lars_weight_decay * ||param||);
    velocity = mu * velocity + local_lr * (grad + lars_weight_decay * param);
    param -= velocity.

    >>> opt = LarsMomentumOptimizer(learning_rate=0.001, momentum=0.9)
    """

    type = "lars_momentum"
    _velocity_acc_str = "velocity"
    _state = (("Velocity", "VelocityOut", "velocity", 0.0),)

    def __init__(self, learning_rate, momentum, lars_coeff=0.001, lars_weight_decay=0.0005,
                 parameter_list=None, regularization=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._momentum, self._lars_coeff, self._lars_weight_decay = _floats(
            type(self).__name__, momentum=momentum, lars_coeff=lars_coeff,
            lars_weight_decay=lars_weight_decay)

    def _attrs(self, param):
        return {"mu": self._momentum, "lars_coeff": self._lars_coeff,
                "lars_weight_decay": self._lars_weight_decay}


class LambOptimizer(AdamOptimizer):
    """LAMB (You et al.): Adam's moments, plus weight decay inside the trust ratio:
    r = m / (sqrt(v) + epsilon) + lamb_weight_decay * param;
    param -= lr * ||param|| / ||r|| * r. Parameters for which
    exclude_from_weight_decay_fn(param) is true get no decay.

    >>> opt = LambOptimizer(learning_rate=0.002,
    ...                     exclude_from_weight_decay_fn=lambda p: p.name.endswith(".b_0"))
    """

    type = "lamb"

    def __init__(self, learning_rate=0.001, lamb_weight_decay=0.01, beta1=0.9, beta2=0.999,
                 epsilon=1e-6, parameter_list=None, regularization=None, grad_clip=None,
                 exclude_from_weight_decay_fn=None, name=None):
        for arg, value in (("beta1", beta1), ("beta2", beta2)):
            if isinstance(value, Variable):
                raise InvalidArgumentError(
                    f"LambOptimizer: {arg} must be a float (the lamb op has no beta tensor "
                    f"input), got Variable '{value.name}'")
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, regularization,
                         grad_clip, name)
        (self._weight_decay,) = _floats("LambOptimizer", lamb_weight_decay=lamb_weight_decay)
        if exclude_from_weight_decay_fn is not None and not callable(
                exclude_from_weight_decay_fn):
            raise InvalidArgumentError(
                f"LambOptimizer: exclude_from_weight_decay_fn must be a function param -> bool "
                f"or None, got {exclude_from_weight_decay_fn!r}")
        self._exclude_from_weight_decay_fn = exclude_from_weight_decay_fn

    def _append_optimize_op(self, block, param, grad):
        prog = block.program
        m1 = self._get_accumulator(prog, self._moment1_acc_str, param)
        m2 = self._get_accumulator(prog, self._moment2_acc_str, param)
        excluded = (self._exclude_from_weight_decay_fn is not None
                    and self._exclude_from_weight_decay_fn(param))
        # fluid 1.8 passes the beta powers in but never advances them (no Beta*PowOut)
        return block.append_op(
            "lamb",
            inputs={"Param": [param], "Grad": [grad],
                    "LearningRate": [self._create_param_lr(block, param)],
                    "Moment1": [m1], "Moment2": [m2],
                    "Beta1Pow": [self._get_accumulator(prog, self._beta1_pow_acc_str, param)],
                    "Beta2Pow": [self._get_accumulator(prog, self._beta2_pow_acc_str, param)]},
            outputs={"ParamOut": [param], "Moment1Out": [m1], "Moment2Out": [m2]},
            attrs={"beta1": float(self._beta1), "beta2": float(self._beta2),
                   "epsilon": self._epsilon,
                   "weight_decay": 0.0 if excluded else self._weight_decay})


Adagrad = AdagradOptimizer
DecayedAdagrad = DecayedAdagradOptimizer
RMSProp = RMSPropOptimizer
Adadelta = AdadeltaOptimizer
Adamax = AdamaxOptimizer
Ftrl = FtrlOptimizer
LarsMomentum = LarsMomentumOptimizer
Lamb = LambOptimizer
