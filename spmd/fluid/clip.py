"""fluid.clip: gradient clipping by value, by norm, by global norm; error clipping;
set_gradient_clip."""
from ..optimizer.fluid_names import (  # noqa: F401
    BaseErrorClipAttr,
    ClipByGlobalNorm,
    ClipByNorm,
    ClipByValue,
    ErrorClipByValue,
    GradientClipBase,
    GradientClipByGlobalNorm,
    GradientClipByNorm,
    GradientClipByValue,
    append_gradient_clip_ops,
    error_clip_callback,
    set_gradient_clip,
)

__all__ = [
    "BaseErrorClipAttr", "ClipByGlobalNorm", "ClipByNorm", "ClipByValue", "ErrorClipByValue",
    "GradientClipBase", "GradientClipByGlobalNorm", "GradientClipByNorm", "GradientClipByValue",
    "append_gradient_clip_ops", "error_clip_callback", "set_gradient_clip",
]
