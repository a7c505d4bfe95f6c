"""Weight decay as extra gradient terms: L2 (grad += coeff * param) and L1
(grad += coeff * sign(param)).

A parameter's own regularizer (ParamAttr(regularizer=...), kept as `param.regularizer`) wins
over the optimizer's `regularization` / `weight_decay`, as in fluid 1.8.

>>> reg = L2DecayRegularizer(regularization_coeff=1e-4)   # fluid.regularizer.L2Decay(1e-4)
>>> reg = L2Decay(coeff=1e-4)                             # paddle.regularizer.L2Decay(1e-4)
"""
from __future__ import annotations

import numbers

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .common import tmp_var

__all__ = ["L1Decay", "L1DecayRegularizer", "L2Decay", "L2DecayRegularizer",
           "WeightDecayRegularizer", "append_regularization_ops"]


def _coeff(value, where: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InvalidArgumentError(
            f"{where}: the regularization coefficient must be a float, got {value!r} "
            f"({type(value).__name__})"
        )
    return float(value)


class WeightDecayRegularizer:
    """Base of the regularizers: `__call__(param, grad, block)` appends the ops computing the
    decay term of `param` and returns the variable holding it (shaped like `param`)."""

    _label = ""  # how str() names it, as fluid does

    def __init__(self, regularization_coeff: float = 0.0):
        self._regularization_coeff = _coeff(regularization_coeff, type(self).__name__)

    def __call__(self, param, grad, block):
        raise NotImplementedError

    def __str__(self):
        return f"{self._label}, regularization_coeff={self._regularization_coeff:f}"


class L2DecayRegularizer(WeightDecayRegularizer):
    """L2 weight decay: the gradient gets `regularization_coeff * param` added.

    >>> opt_reg = L2DecayRegularizer(regularization_coeff=0.1)
    """

    _label = "L2Decay"

    def __call__(self, param, grad, block):
        decay = tmp_var(block, f"{param.name}_l2_decay", param.shape, param.dtype)
        block.append_op("scale", inputs={"X": [param]}, outputs={"Out": [decay]},
                        attrs={"scale": self._regularization_coeff})
        return decay


class L1DecayRegularizer(WeightDecayRegularizer):
    """L1 weight decay: the gradient gets `regularization_coeff * sign(param)` added.

    >>> opt_reg = L1DecayRegularizer(regularization_coeff=0.1)
    """

    _label = "L1Decay"

    def __call__(self, param, grad, block):
        sign = tmp_var(block, f"{param.name}_sign", param.shape, param.dtype)
        block.append_op("sign", inputs={"X": [param]}, outputs={"Out": [sign]})
        decay = tmp_var(block, f"{param.name}_l1_decay", param.shape, param.dtype)
        block.append_op("scale", inputs={"X": [sign]}, outputs={"Out": [decay]},
                        attrs={"scale": self._regularization_coeff})
        return decay


class L2Decay(L2DecayRegularizer):
    """paddle.regularizer.L2Decay(coeff=0.0): L2DecayRegularizer under its 2.x name.

    >>> reg = L2Decay(coeff=0.01)
    """

    def __init__(self, coeff: float = 0.0):
        super().__init__(coeff)


class L1Decay(L1DecayRegularizer):
    """paddle.regularizer.L1Decay(coeff=0.0): L1DecayRegularizer under its 2.x name.

    >>> reg = L1Decay(coeff=0.01)
    """

    def __init__(self, coeff: float = 0.0):
        super().__init__(coeff)


def check_regularizer(value, where: str):
    """None or a WeightDecayRegularizer, else an error naming what was given."""
    if value is not None and not isinstance(value, WeightDecayRegularizer):
        raise InvalidArgumentError(
            f"{where}: expected a regularizer (L2Decay/L1Decay) or None, got {value!r}"
        )
    return value


def append_regularization_ops(params_grads, regularization=None):
    """For each (param, grad), append `new_grad = sum(grad, decay(param))` and return the
    (param, new_grad) pairs; pairs without a regularizer (or without a gradient) pass through.

    The regularized gradient is a new variable, not written over `grad`: `grad` stays the raw
    gradient recorded in `program.grad_var_map`, which a data-parallel pass reduces across
    ranks before these ops read it. Every op appended here has role OpRole.OPTIMIZE.

    A sparse gradient (SelectedRows, embedding(is_sparse=True)) summed with the dense decay
    term is dense, as in fluid 1.8.5 (its sum op gives a LoDTensor): every row of the table
    decays each step, looked up or not, and the update is the dense one, a table-sized
    gradient included (tests/unit/test_sparse_rows_oracle.py). Clipping, by contrast, works
    on the looked-up rows (optimizer/clip.py). For a large table whose step should cost its
    rows only, leave the table out of weight decay: ParamAttr(regularizer=None) does not,
    since the optimizer's `regularization` then applies; give the optimizer none and set
    ParamAttr(regularizer=...) on the dense parameters.
    """
    check_regularizer(regularization, "append_regularization_ops")
    result = []
    for param, grad in params_grads:
        reg = getattr(param, "regularizer", None) or regularization
        if grad is None or reg is None:
            result.append((param, grad))
            continue
        check_regularizer(reg, f"regularizer of parameter '{param.name}'")
        block = grad.block
        with block.program.role_guard(OpRole.OPTIMIZE):
            term = reg(param, grad, block)
            new_grad = tmp_var(block, f"{param.name}_grad_regularized", grad.shape, grad.dtype)
            block.append_op("sum", inputs={"X": [grad, term]}, outputs={"Out": [new_grad]})
        result.append((param, new_grad))
    return result
