"""Weight normalization (fluid.WeightNormParamAttr): a layer's weight w is built from two
parameters, a direction v (the weight's shape) and a magnitude g (1 everywhere but `dim`),
as w = g * v / ||v||, the norm taken over every dim but `dim` (all dims when dim is None).
g starts at ||v|| (computed in the startup program after v's initializer), so w starts equal
to v. Both are trained; the optimizer never sees w, which is recomputed every step.

>>> # fc(x, size=10, param_attr=WeightNormParamAttr(dim=None, name="w"))  # params w_g, w_v
"""
from __future__ import annotations

import copy

from ..core import unique_name
from ..errors import InvalidArgumentError
from .param_attr import ParamAttr

__all__ = ["WeightNormParamAttr", "create_weight_normalized"]


class WeightNormParamAttr(ParamAttr):
    """A ParamAttr asking for weight normalization along `dim` (None: over the whole weight).

    >>> WeightNormParamAttr(dim=0, name="fc_w").dim
    0
    """

    def __init__(self, dim: int | None = None, name: str | None = None, initializer=None,
                 learning_rate: float = 1.0, regularizer=None, trainable: bool = True,
                 do_model_average: bool = False, need_clip: bool = True):
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise InvalidArgumentError(
                f"WeightNormParamAttr(dim=...) expects an int or None, got {dim!r}")
        super().__init__(name=name, initializer=initializer, learning_rate=learning_rate,
                         regularizer=regularizer, trainable=trainable,
                         do_model_average=do_model_average, need_clip=need_clip)
        self.dim = dim


def _norm_except_dim(block, v, dim: int | None, out=None):
    """sqrt(sum of v**2 over every axis but `dim`), keeping v's rank."""
    axes = [i for i in range(len(v.shape)) if i != dim]
    shape = [1 if i in axes else d for i, d in enumerate(v.shape)]

    def tmp(tag):
        return block.create_var(name=unique_name.generate(f"{v.name}.{tag}"), shape=shape,
                                dtype=v.dtype)

    squared = block.create_var(name=unique_name.generate(f"{v.name}.sq"), shape=v.shape,
                               dtype=v.dtype)
    block.append_op("square", {"X": [v]}, {"Out": [squared]})
    total = tmp("sqsum")
    block.append_op("reduce_sum", {"X": [squared]}, {"Out": [total]},
                    {"dim": axes, "keep_dim": True, "reduce_all": False})
    out = out if out is not None else tmp("norm")
    block.append_op("sqrt", {"X": [total]}, {"Out": [out]})
    return out


def create_weight_normalized(helper, attr: WeightNormParamAttr, shape, dtype,
                             default_initializer):
    """The weight-normalized w for `helper`'s layer: parameters `<name>_g` and `<name>_v`, ops
    computing w in the main program, and g's start value ||v|| in the startup program."""
    rank = len(shape)
    dim = attr.dim
    if dim is not None:
        if not -rank <= dim < rank:
            raise InvalidArgumentError(
                f"WeightNormParamAttr(dim={dim}) is out of range for a rank-{rank} weight "
                f"of shape {list(shape)}")
        dim %= rank
    name = attr.name or unique_name.generate(f"{helper.name}.w")
    plain = ParamAttr(initializer=attr.initializer, learning_rate=attr.learning_rate,
                      regularizer=attr.regularizer, trainable=attr.trainable,
                      do_model_average=attr.do_model_average, need_clip=attr.need_clip)
    v_attr, g_attr = copy.copy(plain), copy.copy(plain)
    v_attr.name, g_attr.name = f"{name}_v", f"{name}_g"
    g_attr.initializer = None
    g_shape = [1 if dim is None or i != dim else d for i, d in enumerate(shape)]
    v = helper.create_parameter(v_attr, shape, dtype, default_initializer=default_initializer)
    g = helper.create_parameter(g_attr, g_shape, dtype,
                                default_initializer=_constant_one())
    startup = helper.startup_program.global_block()
    _norm_except_dim(startup, startup.var(v.name), dim, out=startup.var(g.name))

    block = helper.main_program.current_block()
    norm = _norm_except_dim(block, v, dim)
    scale = block.create_var(name=unique_name.generate(f"{name}.scale"), shape=g_shape,
                             dtype=dtype)
    block.append_op("elementwise_div", {"X": [g], "Y": [norm]}, {"Out": [scale]}, {"axis": -1})
    w = block.create_var(name=unique_name.generate(f"{name}.weight_norm"), shape=shape,
                         dtype=dtype)
    block.append_op("elementwise_mul", {"X": [v], "Y": [scale]}, {"Out": [w]}, {"axis": -1})
    return w


def _constant_one():
    from .initializer import ConstantInitializer

    return ConstantInitializer(1.0)
