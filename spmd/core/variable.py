"""Variable and Parameter: named, typed, shaped slots of a Block; a Scope holds their data."""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .dtypes import convert_dtype
from .fluid_compat import VariableCompat
from .shapes import normalize_shape


class Variable(VariableCompat):
    """A symbolic tensor in a Block. Shape dims of -1 are unknown until run time (the batch).

    Created through `Block.create_var` or the layers, never directly by users. Arithmetic
    operators (`a + b`, `a * 2`) append elementwise ops (see spmd/layers/math_op_patch.py).
    """

    def __init__(self, block, name: str, shape=None, dtype="float32", persistable=False,
                 stop_gradient=False, lod_level=0, is_data=False, type="LOD_TENSOR",
                 need_check_feed=False, **ignored):
        # fluid's Variable ignores keywords it does not know (Paddle's own tests pass a
        # misspelt `psersistable=True`): so does this one
        self.block = block
        self.name = name
        self.shape = normalize_shape(shape, name) if shape is not None else ()
        self.dtype = convert_dtype(dtype)
        self.persistable = bool(persistable)
        self.stop_gradient = bool(stop_gradient)
        self.lod_level = 0 if lod_level is None else lod_level  # None: fluid's default, 0
        self.is_data = bool(is_data)
        self.type = type
        self.need_check_feed = need_check_feed
        self.error_clip = None  # an ErrorClipByValue, applied to this var's gradient
        if self.__class__ is Variable:  # a Parameter joins once its own checks passed
            self._join_block()

    def _join_block(self) -> None:
        """fluid's framework.Variable(block, ...) made directly is a variable of its block,
        as one from block.create_var (which registers the same object again)."""
        vars = getattr(self.block, "vars", None)
        if vars is not None and self.name not in vars:
            vars[self.name] = self
            self.block.program._bump()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def grad_name(self) -> str:
        """The name of this variable's gradient: the one a backward pass recorded (it may be
        renamed, `grad/x@GRAD`, where passes would clash), else `<name>@GRAD` as fluid's
        Variable.grad_name is before any backward pass."""
        return self.block.program.grad_var_map.get(self.name, self.name + "@GRAD")

    def to_dict(self) -> dict:
        d = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
             "persistable": self.persistable, "stop_gradient": self.stop_gradient,
             "lod_level": self.lod_level, "is_data": self.is_data, "type": self.type}
        if self.need_check_feed:  # fluid.data's feeds are checked in clones too
            d["need_check_feed"] = True
        return d

    def _set_error_clip(self, error_clip):
        """fluid's spelling of `var.error_clip = clip` (fluid.clip.ErrorClipByValue)."""
        self.error_clip = error_clip

    def _short(self) -> str:
        flags = "".join(f for f, on in (("P", self.persistable), ("D", self.is_data)) if on)
        return f"{self.name}{list(self.shape)}:{self.dtype}" + (f"[{flags}]" if flags else "")

    def __repr__(self):
        return f"Variable({self._short()})"

    __str__ = __repr__

    # fluid compatibility: `var.desc.name()`, `var.desc.shape()` are used by some scripts.
    @property
    def desc(self):
        return _VarDescView(self)


class _VarDescView:
    def __init__(self, var):
        self._var = var

    def name(self):
        return self._var.name

    def shape(self):
        return list(self._var.shape)

    def set_shape(self, shape) -> None:
        """fluid's `var.desc.set_shape(dims)`: the variable's declared shape; the program's
        plans are rebuilt (a load then checks the saved arrays against the new shape)."""
        self._var.shape = normalize_shape(shape, self._var.name)
        program = getattr(getattr(self._var, "block", None), "program", None)
        if program is not None:
            program._bump()

    def dtype(self):
        return self._var.dtype

    def persistable(self):
        return self._var.persistable


class Parameter(Variable):
    """A trainable, persistable Variable with its initializer, regularizer and learning rate."""

    def __init__(self, block, name, shape, dtype="float32", trainable=True, initializer=None,
                 regularizer=None, learning_rate=1.0, need_clip=True, gradient_clip_attr=None,
                 do_model_average=None, optimize_attr=None, **kwargs):
        kwargs.setdefault("persistable", True)
        # fluid 1.8's Parameter checks (ValueErrors): a shape and a dtype given, one dim at least
        if shape is None or dtype is None:
            missing = "shape" if shape is None else "dtype"
            raise InvalidArgumentError(f"parameter '{name}': its {missing} must be given, got None")
        if len(shape) == 0:
            raise InvalidArgumentError(
                f"parameter '{name}' needs one dimension at least, got shape []; use [1] for "
                f"a scalar")
        super().__init__(block, name, shape, dtype, **kwargs)
        if any(d < 0 for d in self.shape):
            raise InvalidArgumentError(
                f"parameter '{name}' needs a fully known shape, got {list(self.shape)}"
            )
        self.trainable = bool(trainable)
        self.stop_gradient = not self.trainable
        self.initializer = initializer
        self.regularizer = regularizer
        # fluid's Parameter(optimize_attr={'learning_rate': r}) names the rate this way too
        self.optimize_attr = dict(optimize_attr or {}, learning_rate=float(
            (optimize_attr or {}).get("learning_rate", learning_rate)))
        self.need_clip = need_clip
        self.gradient_clip_attr = gradient_clip_attr
        self.do_model_average = do_model_average
        self.is_distributed = False  # fluid's mark of a table cut across pservers
        self._join_block()

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(parameter=True, trainable=self.trainable,
                 learning_rate=self.optimize_attr["learning_rate"], need_clip=self.need_clip)
        return d

    def __repr__(self):
        return f"Parameter({self._short()})"

    __str__ = __repr__
