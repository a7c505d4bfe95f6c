"""Automatic differentiation of Programs: append_backward and gradients."""
from . import control_flow  # noqa: F401 - registers the sub-block grad makers
from .backward import GradContext, append_backward, default_grad_maker, gradients

__all__ = ["GradContext", "append_backward", "default_grad_maker", "gradients"]
