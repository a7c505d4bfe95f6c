"""ParamAttr: how a layer creates one of its parameters (name, initializer, learning rate,
regularizer, trainable, need_clip), as in fluid 1.8.

>>> attr = ParamAttr(name="fc_w", initializer=Constant(0.5), learning_rate=0.1)
>>> # fc(x, size=10, param_attr=attr)
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .initializer import Initializer

__all__ = ["ParamAttr"]


def _is_regularizer(value) -> bool:
    """Weight-decay regularizers live in spmd.optimizer (imported here, not at module level, so
    that importing the layers does not pull in the optimizers)."""
    from ..optimizer.regularizer import WeightDecayRegularizer

    return isinstance(value, WeightDecayRegularizer)


class ParamAttr:
    """Attributes of one parameter a layer creates.

    Args:
        name: the parameter's name; None lets the layer pick a unique one (`fc_0.w_0`). Two
            layers given the same name share the parameter.
        initializer: an Initializer; None means the layer's default (fc: Xavier weights,
            zero bias).
        learning_rate: multiplier of the optimizer's learning rate for this parameter.
        regularizer: a weight-decay regularizer (L1Decay / L2Decay); overrides the optimizer's.
        trainable: False keeps the parameter out of the optimizer (and out of backward).
        do_model_average: accepted for fluid compatibility.
        need_clip: False exempts the parameter from gradient clipping.

    >>> ParamAttr(name="w", trainable=False).trainable
    False
    """

    def __init__(self, name: str | None = None, initializer: Initializer | None = None,
                 learning_rate: float = 1.0, regularizer=None, trainable: bool = True,
                 do_model_average: bool = True, need_clip: bool = True):
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentError(
                f"ParamAttr(name=...) expects a str or None, got {type(name).__name__}")
        if initializer is not None and not isinstance(initializer, Initializer):
            raise InvalidArgumentError(
                f"ParamAttr(initializer=...) expects an initializer (e.g. "
                f"fluid.initializer.Constant(0.0)), got {type(initializer).__name__}")
        if regularizer is not None and not _is_regularizer(regularizer):
            raise InvalidArgumentError(
                f"ParamAttr(regularizer=...) expects a weight-decay regularizer (e.g. "
                f"fluid.regularizer.L2Decay(1e-4)), got {type(regularizer).__name__}")
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
            raise InvalidArgumentError(
                f"ParamAttr(learning_rate=...) expects a number, got {learning_rate!r}")
        self.name = name
        self.initializer = initializer
        self.learning_rate = float(learning_rate)
        self.regularizer = regularizer
        self.trainable = bool(trainable)
        self.do_model_average = do_model_average
        self.need_clip = bool(need_clip)

    def _set_default_initializer(self, initializer: Initializer):
        if self.initializer is None:
            self.initializer = initializer

    def _to_kwargs(self, with_initializer: bool = False) -> dict:
        """Keyword arguments of Block.create_parameter."""
        kwargs = {"name": self.name, "trainable": self.trainable,
                  "learning_rate": self.learning_rate, "regularizer": self.regularizer,
                  "need_clip": self.need_clip, "do_model_average": self.do_model_average}
        if with_initializer:
            kwargs["initializer"] = self.initializer
        return kwargs

    @staticmethod
    def _to_attr(arg):
        """fluid's coercion of a layer's param_attr/bias_attr argument: None -> ParamAttr(),
        a name -> ParamAttr(name), an initializer or regularizer -> ParamAttr holding it,
        False stays False (no parameter), True -> ParamAttr(), lists element-wise."""
        if arg is None or arg is True:
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, (list, tuple)):
            return [ParamAttr._to_attr(a) for a in arg]
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        if _is_regularizer(arg):
            return ParamAttr(regularizer=arg)
        raise InvalidArgumentError(
            f"a parameter attribute must be a ParamAttr, a name, an initializer, a regularizer, "
            f"None or False; got {type(arg).__name__}: {arg!r}")

    def __repr__(self):
        return (f"ParamAttr(name={self.name!r}, initializer={self.initializer!r}, "
                f"learning_rate={self.learning_rate}, regularizer={self.regularizer!r}, "
                f"trainable={self.trainable}, need_clip={self.need_clip})")
