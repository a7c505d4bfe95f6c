"""fluid.backward: append_backward and gradients (calc_gradient is fluid's other name for
gradients), and the name helpers fluid's tests use."""
from ..autodiff import append_backward, gradients

__all__ = ["append_backward", "gradients"]



def calc_gradient(targets, inputs, target_gradients=None, no_grad_set=None):
    """gradients' list, but a single Variable (or None) when there is one input, as fluid
    1.8.5's calc_gradient returns (fluid.gradients always returns a list)."""
    grads = gradients(targets, inputs, target_gradients, no_grad_set)
    return grads[0] if len(grads) == 1 else grads


def _as_list(x) -> list:
    """`x` as a list: [] for None, a list of a list or tuple's items, else [x] (fluid's)."""
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _append_grad_suffix_(name: str) -> str:
    """`name@GRAD`, the gradient's name."""
    return name + "@GRAD"


def _strip_grad_suffix_(name: str) -> str:
    """The forward name of a gradient name (`x@GRAD`, `x@GRAD@RENAME@0` -> `x`)."""
    pos = name.find("@GRAD")
    return name[:pos] if pos != -1 else name


def _get_stop_gradients_(program) -> dict[int, set[str]]:
    """{block index: the gradient names of that block's stop_gradient variables}."""
    return {block.idx: {_append_grad_suffix_(v.name) for v in block.vars.values()
                        if v.stop_gradient}
            for block in program.blocks}
