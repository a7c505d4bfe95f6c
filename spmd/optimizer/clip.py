"""Gradient clipping passed as an optimizer's `grad_clip`: by value, by each gradient's norm, or
by the global norm of all gradients.

Parameters whose `need_clip` is False (paddle 2.x: ParamAttr(need_clip=False)), or for which
the fluid 1.8 `need_clip(param)` callable returns False, keep their gradient unchanged; with
GradientClipByGlobalNorm their gradients also stay out of the global norm.

>>> clip = GradientClipByGlobalNorm(clip_norm=1.0)   # paddle.nn.ClipGradByGlobalNorm(1.0)
>>> # opt = SGD(learning_rate=0.1, grad_clip=clip)
"""
from __future__ import annotations

import copy
import numbers
import warnings

from ..core.operator import OpRole
from ..core.program import default_main_program
from ..errors import InvalidArgumentError
from .common import tmp_var

__all__ = ["BaseErrorClipAttr", "ClipByGlobalNorm", "ClipByNorm", "ClipByValue",
           "ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue", "ErrorClipByValue",
           "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm",
           "GradientClipByValue", "append_gradient_clip_ops", "error_clip_callback",
           "set_gradient_clip"]


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
        self._clip_every_gradient = False  # set_gradient_clip's legacy path: need_clip unread

    def _needs_clip(self, param) -> bool:
        if self._clip_every_gradient:
            return True
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


# paddle 2.x names (paddle.nn.ClipGradBy*) and fluid's short aliases: the same classes.
ClipGradByValue = ClipByValue = GradientClipByValue
ClipGradByNorm = ClipByNorm = GradientClipByNorm
ClipGradByGlobalNorm = ClipByGlobalNorm = GradientClipByGlobalNorm


class BaseErrorClipAttr:
    """Base of the error clips: `_append_clip_op(block, grad_name)` appends the op clipping
    the gradient `grad_name` in place (called by the backward pass)."""

    def _append_clip_op(self, block, grad_name):
        raise NotImplementedError


class ErrorClipByValue(BaseErrorClipAttr):
    """Clip the gradient (the "error") flowing back through a variable into [min, max], as soon
    as the backward pass has computed it; `min` defaults to -max. Set it on the forward
    variable: `var.error_clip = ErrorClipByValue(...)`.

    >>> clip = ErrorClipByValue(max=1e-3)        # hidden.error_clip = clip
    """

    def __init__(self, max, min=None):  # fluid's argument names
        where = type(self).__name__
        self.max = _float(max, "max", where)
        self.min = -self.max if min is None else _float(min, "min", where)
        if self.min > self.max:
            raise InvalidArgumentError(f"{where}: min ({self.min}) must be <= max ({self.max})")

    def __str__(self):
        return f"ByValue, min={self.min:f}, max={self.max:f}"

    def _append_clip_op(self, block, grad_name):
        block.append_op("clip", inputs={"X": [grad_name]}, outputs={"Out": [grad_name]},
                        attrs={"min": self.min, "max": self.max})


def error_clip_callback(block, context):
    """fluid's backward callback: clip the gradients the last op of `block` wrote, for the
    forward variables (context: grad name -> forward name) that carry an error_clip. spmd's
    backward pass applies error clips itself; this stays for programs that pass it."""
    op = block.ops[-1]
    for name in op.output_arg_names:
        fwd = context.get(name)
        clip = getattr(block.vars.get(fwd), "error_clip", None) if fwd else None
        if clip is not None and not isinstance(clip, BaseErrorClipAttr):
            raise InvalidArgumentError(
                f"error_clip of variable '{fwd}' must be an ErrorClipByValue, got {clip!r}")
        if clip is not None:
            clip._append_clip_op(block, name)


def set_gradient_clip(clip, param_list=None, program=None):
    """fluid 1.8's older way to clip: attach `clip` to the parameters of `program` (default
    main program) named in `param_list` (names or Parameters; default all). An optimizer built
    without `grad_clip` then applies it in minimize; `grad_clip=` wins when both are given.
    As in fluid 1.8, the clip only takes effect when every parameter with a gradient carries
    one (the last parameter's clip, in name order, is used for all), and it must be set
    before minimize.

    >>> # set_gradient_clip(GradientClipByGlobalNorm(clip_norm=2.0))
    >>> # fluid.optimizer.SGD(learning_rate=1e-3).minimize(loss)
    """
    warnings.warn("Caution! 'set_gradient_clip' is not recommended and may be deprecated in "
                  "future! Set 'grad_clip' when constructing the optimizer instead.",
                  stacklevel=2)
    if not isinstance(clip, GradientClipBase):
        raise InvalidArgumentError(
            f"set_gradient_clip: clip must be GradientClipByValue, GradientClipByNorm or "
            f"GradientClipByGlobalNorm, got {clip!r}")
    program = default_main_program() if program is None else program
    block = program.global_block()
    if any(op.role is OpRole.OPTIMIZE for op in block.ops):
        warnings.warn("'minimize' has been invoked before, this will make 'set_gradient_clip' "
                      "be ineffective! Please invoke 'set_gradient_clip' before 'minimize'.",
                      stacklevel=2)
    params = block.all_parameters() if param_list is None else list(param_list)
    for i, p in enumerate(params):
        if isinstance(p, str):
            if not block.has_var(p) or p not in {q.name for q in block.all_parameters()}:
                raise InvalidArgumentError(
                    f"set_gradient_clip: param_list[{i}] '{p}' is not a parameter of the program")
            params[i] = block.var(p)
        elif not hasattr(params[i], "gradient_clip_attr"):
            raise InvalidArgumentError(
                f"set_gradient_clip: param_list must hold Parameters or parameter names, "
                f"got {p!r} at index {i}")
    for p in params:
        p.gradient_clip_attr = copy.deepcopy(clip)


def append_gradient_clip_ops(params_grads):
    """Apply the clips set_gradient_clip attached to the parameters, by fluid 1.8's legacy
    rule: only when every parameter with a gradient has one; the last parameter's clip (in
    name order) makes the ops for every gradient, need_clip unread; a global norm sums the
    gradients of the parameters whose own clip is a global-norm clip of that group."""
    params_grads = list(params_grads)
    clip = None
    for p, g in params_grads:
        if g is None:
            continue
        clip = getattr(p, "gradient_clip_attr", None)
        if clip is None:
            return params_grads
        if not isinstance(clip, GradientClipBase):
            raise InvalidArgumentError(
                f"gradient_clip_attr of parameter '{p.name}' must be a GradientClipBase, "
                f"got {clip!r}")
    if clip is None:
        return params_grads
    if isinstance(clip, GradientClipByGlobalNorm):
        return _legacy_global_norm(clip, params_grads)
    clip._clip_every_gradient = True
    try:
        return clip(params_grads)
    finally:
        clip._clip_every_gradient = False


def _legacy_global_norm(clip, params_grads):
    members = [(p, g) for p, g in params_grads if g is not None
               and isinstance(p.gradient_clip_attr, GradientClipByGlobalNorm)
               and p.gradient_clip_attr.group_name == clip.group_name]
    block = members[0][1].block
    result = []
    with block.program.role_guard(OpRole.OPTIMIZE):
        scale = clip._scale_var(block, members)
        for param, grad in params_grads:
            if grad is None:
                result.append((param, grad))
                continue
            out = tmp_var(block, f"{param.name}_grad_clip", grad.shape, grad.dtype)
            block.append_op("elementwise_mul", inputs={"X": [grad], "Y": [scale]},
                            outputs={"Out": [out]})
            result.append((param, out))
    return result


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
