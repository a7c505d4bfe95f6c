"""fluid.backward: append_backward and gradients."""
from ..autodiff import append_backward, gradients  # noqa: F401
