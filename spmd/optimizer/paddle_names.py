"""The paddle 2.x names: paddle.optimizer.{SGD, Momentum, Adam, AdamW, Adagrad, RMSProp,
Adadelta, Adamax, NAdam}, paddle.regularizer.{L1Decay, L2Decay}, paddle.nn.{ClipGradByValue,
ClipGradByNorm, ClipGradByGlobalNorm}.

They build the same ops as the fluid optimizers; only the constructor arguments differ:
`parameters` for `parameter_list`, `weight_decay` (a float means L2Decay(float)) for
`regularization`.

>>> opt = Adam(learning_rate=0.001, weight_decay=1e-4, grad_clip=ClipGradByGlobalNorm(1.0))
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .adaptive import (
    AdadeltaOptimizer,
    AdagradOptimizer,
    AdamaxOptimizer,
    RMSPropOptimizer,
    _floats,
)
from .clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from .common import tmp_var
from .optimizer import AdamOptimizer, MomentumOptimizer, Optimizer, SGDOptimizer
from .regularizer import L1Decay, L2Decay, WeightDecayRegularizer

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "ClipGradByGlobalNorm",
           "ClipGradByNorm", "ClipGradByValue", "L1Decay", "L2Decay", "Momentum", "NAdam",
           "Optimizer", "RMSProp"]

REQUIRED_LR = object()  # paddle 2.x: learning_rate has no default for these


def _weight_decay(value, where: str):
    """paddle 2.x `weight_decay`: None, a float (L2Decay(float)) or a regularizer."""
    if value is None or isinstance(value, WeightDecayRegularizer):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return L2Decay(float(value))
    raise InvalidArgumentError(
        f"{where}: weight_decay must be a float, L2Decay/L1Decay or None, got {value!r}"
    )


class _Paddle2Minimize:
    """paddle 2.x spells minimize's parameter list `parameters`."""

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        return super().minimize(loss, startup_program, parameters, no_grad_set)


class SGD(_Paddle2Minimize, SGDOptimizer):
    """paddle.optimizer.SGD: param -= lr * grad.

    >>> opt = SGD(learning_rate=0.1, weight_decay=0.01)
    """

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 name=None):
        super().__init__(learning_rate, parameter_list=parameters,
                         regularization=_weight_decay(weight_decay, "SGD"), grad_clip=grad_clip,
                         name=name)


class Momentum(_Paddle2Minimize, MomentumOptimizer):
    """paddle.optimizer.Momentum: velocity = momentum * velocity + grad; param -= lr * velocity.

    >>> opt = Momentum(learning_rate=0.1, momentum=0.9, use_nesterov=True)
    """

    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False,
                 weight_decay=None, grad_clip=None, name=None):
        super().__init__(learning_rate, momentum, parameter_list=parameters,
                         use_nesterov=use_nesterov,
                         regularization=_weight_decay(weight_decay, "Momentum"),
                         grad_clip=grad_clip, name=name)


class Adam(_Paddle2Minimize, AdamOptimizer):
    """paddle.optimizer.Adam, with fluid 1.8's adam op update.

    >>> opt = Adam(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameters=None, weight_decay=None, grad_clip=None, name=None,
                 lazy_mode=False):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list=parameters,
                         regularization=_weight_decay(weight_decay, "Adam"),
                         grad_clip=grad_clip, name=name, lazy_mode=lazy_mode)


def _paddle2(fluid_cls, doc: str, defaults: dict, order: tuple):
    """A paddle 2.x class over a fluid optimizer: `parameters` for parameter_list,
    `weight_decay` (float: L2Decay) for regularization; other arguments pass through."""

    def __init__(self, *args, **kwargs):
        where = type(self).__name__
        if len(args) > len(order):
            raise InvalidArgumentError(f"{where} takes at most {len(order)} positional "
                                       f"arguments ({', '.join(order)}), got {len(args)}")
        given = dict(defaults, **dict(zip(order, args)))
        for k, v in kwargs.items():
            if k not in defaults:
                raise InvalidArgumentError(
                    f"{where}() got an unexpected keyword argument '{k}'; it takes "
                    f"{', '.join(defaults)}")
            given[k] = v
        if given["learning_rate"] is REQUIRED_LR:
            raise InvalidArgumentError(f"{where}: learning_rate is required")
        given["parameter_list"] = given.pop("parameters")
        given["regularization"] = _weight_decay(given.pop("weight_decay"), where)
        fluid_cls.__init__(self, **given)

    return type(fluid_cls.__name__.replace("Optimizer", ""), (_Paddle2Minimize, fluid_cls),
                {"__init__": __init__, "__doc__": doc, "__module__": __name__})


_COMMON = {"parameters": None, "weight_decay": None, "grad_clip": None, "name": None}

Adagrad = _paddle2(
    AdagradOptimizer, """paddle.optimizer.Adagrad (fluid's adagrad op).

    >>> opt = Adagrad(learning_rate=0.1, epsilon=1e-6, initial_accumulator_value=0.0)
    """, {"learning_rate": REQUIRED_LR, "epsilon": 1e-6, **_COMMON,
          "initial_accumulator_value": 0.0},
    ("learning_rate", "epsilon", "parameters", "weight_decay", "grad_clip", "name",
     "initial_accumulator_value"))

RMSProp = _paddle2(
    RMSPropOptimizer, """paddle.optimizer.RMSProp (fluid's rmsprop op, centered or not).

    >>> opt = RMSProp(learning_rate=0.01, rho=0.95, momentum=0.9, centered=True)
    """, {"learning_rate": REQUIRED_LR, "rho": 0.95, "epsilon": 1e-6, "momentum": 0.0,
          "centered": False, **_COMMON},
    ("learning_rate", "rho", "epsilon", "momentum", "centered", "parameters", "weight_decay",
     "grad_clip", "name"))

Adadelta = _paddle2(
    AdadeltaOptimizer, """paddle.optimizer.Adadelta (fluid 1.8's adadelta op, which does not
    use the learning rate).

    >>> opt = Adadelta(learning_rate=0.001, epsilon=1e-6, rho=0.95)
    """, {"learning_rate": 0.001, "epsilon": 1e-6, "rho": 0.95, **_COMMON},
    ("learning_rate", "epsilon", "rho", "parameters", "weight_decay", "grad_clip", "name"))

Adamax = _paddle2(
    AdamaxOptimizer, """paddle.optimizer.Adamax (fluid's adamax op).

    >>> opt = Adamax(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8)
    """, {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, **_COMMON},
    ("learning_rate", "beta1", "beta2", "epsilon", "parameters", "weight_decay", "grad_clip",
     "name"))


class AdamW(Adam):
    """paddle.optimizer.AdamW: Adam with decoupled weight decay. Before each parameter's adam
    update, param *= 1 - lr * weight_decay (paddle 2.x's static AdamW), for the parameters
    whose name apply_decay_param_fun(name) accepts (all when it is None). The adam update is
    fluid 1.8's (see spmd/kernels/optim.py).

    >>> opt = AdamW(learning_rate=0.001, weight_decay=0.01,
    ...             apply_decay_param_fun=lambda name: not name.endswith(".b_0"))
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 parameters=None, weight_decay=0.01, apply_decay_param_fun=None, grad_clip=None,
                 lazy_mode=False, name=None):
        if not isinstance(weight_decay, numbers.Real) or isinstance(weight_decay, bool):
            raise InvalidArgumentError(
                f"AdamW: weight_decay is the decoupled decay coefficient, a float; got "
                f"{weight_decay!r}")
        if apply_decay_param_fun is not None and not callable(apply_decay_param_fun):
            raise InvalidArgumentError(
                f"AdamW: apply_decay_param_fun must be a function name -> bool or None, got "
                f"{apply_decay_param_fun!r}")
        super().__init__(learning_rate, beta1, beta2, epsilon, parameters=parameters,
                         grad_clip=grad_clip, name=name, lazy_mode=lazy_mode)
        self._coeff = float(weight_decay)
        self._apply_decay_param_fun = apply_decay_param_fun

    def _append_optimize_op(self, block, param, grad):
        if self._coeff != 0.0 and (self._apply_decay_param_fun is None
                                   or self._apply_decay_param_fun(param.name)):
            lr = self._create_param_lr(block, param)
            coeff = tmp_var(block, f"{param.name}_decay_coeff", [1], lr.dtype)
            block.append_op("scale", inputs={"X": [lr]}, outputs={"Out": [coeff]},
                            attrs={"scale": -self._coeff, "bias": 1.0})
            if coeff.dtype != param.dtype:
                cast = tmp_var(block, f"{param.name}_decay_coeff", [1], param.dtype)
                block.append_op("cast", inputs={"X": [coeff]}, outputs={"Out": [cast]},
                                attrs={"in_dtype": coeff.dtype, "out_dtype": param.dtype})
                coeff = cast
            decayed = tmp_var(block, f"{param.name}_decayed", param.shape, param.dtype)
            block.append_op("elementwise_mul", inputs={"X": [param], "Y": [coeff]},
                            outputs={"Out": [decayed]})
            block.append_op("assign", inputs={"X": [decayed]}, outputs={"Out": [param]})
        return super()._append_optimize_op(block, param, grad)


class NAdam(_Paddle2Minimize, Optimizer):
    """paddle.optimizer.NAdam (Paddle 2.6+): Adam with Nesterov momentum (Dozat), through
    Paddle's nadam op (formulas in spmd/kernels/optim.py). Per parameter it keeps five
    accumulators shaped like the parameter, with Paddle's names: momentum_decay_pow, beta2_pow
    and mu_product (starting at 1), moment1 and moment2 (starting at 0). A float weight_decay
    is L2Decay added to the gradient, as in Paddle.

    >>> opt = NAdam(learning_rate=0.002, beta1=0.9, beta2=0.999, momentum_decay=0.004)
    >>> # opt.minimize(avg_loss)
    """

    type = "nadam"
    # (accumulator, initial value) in Paddle's order of creation
    _accs = (("momentum_decay_pow", 1.0), ("beta2_pow", 1.0), ("mu_product", 1.0),
             ("moment1", 0.0), ("moment2", 0.0))

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 momentum_decay=0.004, parameters=None, weight_decay=None, grad_clip=None,
                 name=None):
        super().__init__(learning_rate, parameter_list=parameters,
                         regularization=_weight_decay(weight_decay, "NAdam"),
                         grad_clip=grad_clip, name=name)
        self._beta1, self._beta2, self._epsilon, self._momentum_decay = _floats(
            "NAdam", beta1=beta1, beta2=beta2, epsilon=epsilon, momentum_decay=momentum_decay)
        if isinstance(learning_rate, numbers.Real) and learning_rate < 0:
            raise InvalidArgumentError(f"NAdam: learning_rate must be >= 0, got {learning_rate}")
        for arg, value in (("beta1", self._beta1), ("beta2", self._beta2)):
            if not 0.0 <= value < 1.0:
                raise InvalidArgumentError(f"NAdam: {arg} must be in [0, 1), got {value}")
        for arg, value in (("epsilon", self._epsilon), ("momentum_decay", self._momentum_decay)):
            if value < 0.0:
                raise InvalidArgumentError(f"NAdam: {arg} must be >= 0, got {value}")

    def _create_accumulators(self, main, startup, parameters):
        for p in parameters:
            for acc, fill in self._accs:
                self._add_accumulator(main, startup, acc, p, fill_value=fill)

    def _append_optimize_op(self, block, param, grad):
        inputs = {"param": [param], "grad": [grad],
                  "learning_rate": [self._create_param_lr(block, param)]}
        outputs = {"param_out": [param]}
        for acc, _ in self._accs:
            var = self._get_accumulator(block.program, acc, param)
            inputs[acc] = [var]
            outputs[acc + "_out"] = [var]
        return block.append_op(
            "nadam", inputs=inputs, outputs=outputs,
            attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                   "momentum_decay": self._momentum_decay, "multi_precision": False})
