"""Gradient clipping passed as an optimizer's `grad_clip`: by value, by each gradient's norm, or
by the global norm of all gradients.

Parameters whose `need_clip` is False (paddle 2.x: ParamAttr(need_clip=False)), or for which
the fluid 1.8 `need_clip(param)` callable returns False, keep their gradient unchanged; with
GradientClipByGlobalNorm their gradients also stay out of the global norm.

>>> clip = GradientClipByGlobalNorm(clip_norm=1.0)   # paddle.nn.ClipGradByGlobalNorm(1.0)
>>> # opt = SGD(learning_rate=0.1, grad_clip=clip)
"""
from __future__ import annotations

import numbers

from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .common import tmp_var

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue", "GradientClipBase",
           "GradientClipByGlobalNorm", "GradientClipByNorm", "GradientClipByValue"]


def _float(value, what: str, where: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise InvalidArgumentError(f"{where}: {what} must be a float, got {value!r}")
    return float(value)


class GradientClipBase:
    """Base of the clipping strategies: `clip(params_grads)` returns new (param, grad) pairs,
    appending the clipping ops (role OpRole.OPTIMIZE) to the gradients' program."""

    def __init__(self, need_clip=None):
        if need_clip is not None and not callable(need_clip):
            raise InvalidArgumentError(
                f"{type(self).__name__}: need_clip must be a function param -> bool or None, "
                f"got {need_clip!r}"
            )
        self._need_clip_func = need_clip

    def _needs_clip(self, param) -> bool:
        if getattr(param, "need_clip", True) is False:
            return False
        return self._need_clip_func is None or bool(self._need_clip_func(param))

    def __call__(self, params_grads):
        params_grads = list(params_grads)
        grads = [g for _, g in params_grads if g is not None]
        if not grads:
            return params_grads
        with grads[0].block.program.role_guard(OpRole.OPTIMIZE):
            return self._static_clip(params_grads)

    clip = __call__

    def _static_clip(self, params_grads):
        raise NotImplementedError


class GradientClipByValue(GradientClipBase):
    """Clip every gradient element into [min, max]; `min` defaults to -max.

    >>> clip = GradientClipByValue(max=1.0)          # elements into [-1, 1]
    """

    def __init__(self, max, min=None, need_clip=None):  # fluid's argument names
        super().__init__(need_clip)
        where = type(self).__name__
        self.max = _float(max, "max", where)
        if min is None:
            if self.max <= 0.0:
                raise InvalidArgumentError(f"{where}: max must be > 0 when min is not given, "
                                           f"got max={self.max}")
            min = -self.max
        self.min = _float(min, "min", where)
        if self.min > self.max:
            raise InvalidArgumentError(f"{where}: min ({self.min}) must be <= max ({self.max})")

    def _static_clip(self, params_grads):
        return _clip_each(self, params_grads, "clip", {"min": self.min, "max": self.max})

    def __str__(self):
        return f"Clip Gradient By Value, min = {self.min:f}, max={self.max:f}"


class GradientClipByNorm(GradientClipBase):
    """Scale each gradient whose L2 norm exceeds `clip_norm` down to norm `clip_norm`
    (fluid's clip_by_norm op, per gradient).

    >>> clip = GradientClipByNorm(clip_norm=1.0)
    """

    def __init__(self, clip_norm, need_clip=None):
        super().__init__(need_clip)
        self.clip_norm = _float(clip_norm, "clip_norm", type(self).__name__)
        if self.clip_norm <= 0.0:
            raise InvalidArgumentError(
                f"{type(self).__name__}: clip_norm must be > 0, got {self.clip_norm}")

    def _static_clip(self, params_grads):
        return _clip_each(self, params_grads, "clip_by_norm", {"max_norm": self.clip_norm})

    def __str__(self):
        return f"Gradient Clip By Norm, clip_norm={self.clip_norm:f}"


class GradientClipByGlobalNorm(GradientClipBase):
    """Scale all gradients by clip_norm / max(global_norm, clip_norm), where global_norm is the
    L2 norm of all (clipped) gradients together, so the direction of the update is kept.

    >>> clip = GradientClipByGlobalNorm(clip_norm=5.0)
    """

    def __init__(self, clip_norm, group_name: str = "default_group", need_clip=None):
        super().__init__(need_clip)
        self.clip_norm = _float(clip_norm, "clip_norm", type(self).__name__)
        if self.clip_norm <= 0.0:
            raise InvalidArgumentError(
                f"{type(self).__name__}: clip_norm must be > 0, got {self.clip_norm}")
        if not isinstance(group_name, str):
            raise InvalidArgumentError(f"{type(self).__name__}: group_name must be a str, "
                                       f"got {group_name!r}")
        self.group_name = group_name

    def _static_clip(self, params_grads):
        clipped = [(p, g) for p, g in params_grads if g is not None and self._needs_clip(p)]
        if not clipped:
            return list(params_grads)
        block = clipped[0][1].block
        scale = self._scale_var(block, clipped)
        result = []
        for param, grad in params_grads:
            if grad is None or not self._needs_clip(param):
                result.append((param, grad))
                continue
            out = tmp_var(block, f"{param.name}_grad_clip", grad.shape, grad.dtype)
            block.append_op("elementwise_mul", inputs={"X": [grad], "Y": [scale]},
                            outputs={"Out": [out]})
            result.append((param, out))
        return result

    def _scale_var(self, block, clipped):
        """Append the ops computing clip_norm / max(sqrt(sum_i ||g_i||^2), clip_norm)."""
        dtype = clipped[0][1].dtype
        squares = []
        for param, grad in clipped:
            sq = tmp_var(block, f"{param.name}_grad_sq_l2_norm", (1,), grad.dtype)
            block.append_op("squared_l2_norm", inputs={"X": [grad]}, outputs={"Out": [sq]})
            squares.append(sq)
        key = f"{self.group_name}_global_norm"
        total = tmp_var(block, f"{key}_square", (1,), dtype)
        block.append_op("sum", inputs={"X": squares}, outputs={"Out": [total]})
        norm = tmp_var(block, key, (1,), dtype)
        block.append_op("sqrt", inputs={"X": [total]}, outputs={"Out": [norm]})
        max_norm = tmp_var(block, f"{key}_clip_norm", (1,), dtype)
        block.append_op("fill_constant", outputs={"Out": [max_norm]},
                        attrs={"shape": [1], "value": self.clip_norm, "dtype": dtype})
        denom = tmp_var(block, f"{key}_max", (1,), dtype)
        block.append_op("elementwise_max", inputs={"X": [max_norm], "Y": [norm]},
                        outputs={"Out": [denom]})
        scale = tmp_var(block, f"{key}_scale", (1,), dtype)
        block.append_op("elementwise_div", inputs={"X": [max_norm], "Y": [denom]},
                        outputs={"Out": [scale]})
        return scale

    def __str__(self):
        return f"Gradient Clip By GlobalNorm, global_norm={self.clip_norm:f}"


# paddle 2.x names (paddle.nn.ClipGradBy*): the same classes.
ClipGradByValue = GradientClipByValue
ClipGradByNorm = GradientClipByNorm
ClipGradByGlobalNorm = GradientClipByGlobalNorm


def check_grad_clip(value, where: str):
    """None or a GradientClipBase, else an error naming what was given."""
    if value is not None and not isinstance(value, GradientClipBase):
        raise InvalidArgumentError(
            f"{where}: grad_clip must be GradientClipByValue, GradientClipByNorm or "
            f"GradientClipByGlobalNorm (paddle: ClipGradBy*), got {value!r}"
        )
    return value


def _clip_each(clip: GradientClipBase, params_grads, op_type: str, attrs: dict):
    """One `op_type` op per gradient that needs clipping, each writing a new variable."""
    result = []
    for param, grad in params_grads:
        if grad is None or not clip._needs_clip(param):
            result.append((param, grad))
            continue
        out = tmp_var(grad.block, f"{param.name}_grad_clip", grad.shape, grad.dtype)
        grad.block.append_op(op_type, inputs={"X": [grad]}, outputs={"Out": [out]}, attrs=attrs)
        result.append((param, out))
    return result
