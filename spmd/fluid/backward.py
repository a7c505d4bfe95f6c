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
    """{block index: the gradient names of that block's stop_gradient variables}. Gradients
    themselves are left out: they are open to gradients (a later pass may differentiate
    them), so fluid's sets never hold `x@GRAD@GRAD`; one a user froze is left out too."""
    return {block.idx: {_append_grad_suffix_(v.name) for v in block.vars.values()
                        if v.stop_gradient and "@GRAD" not in v.name}
            for block in program.blocks}


def _has_grad(op_type: str) -> bool:
    """Whether an op type has a gradient (fluid's core.has_non_empty_grad_op_maker)."""
    from ..autodiff.op_grad import has_grad_op_maker

    return has_grad_op_maker(op_type)


def _find_op_path_(block, outputs, inputs, no_grad_set):
    """The ops of `block` on a differentiable path from `inputs` (all, if empty) to
    `outputs`, in order, as fluid 1.8.5's helper finds them; the stop_gradient inputs of that
    path not reached from `inputs` are added to `no_grad_set`."""
    no_grad_set = set() if no_grad_set is None else no_grad_set
    input_names = {v.name for v in inputs}
    output_names = {v.name for v in outputs}
    relevant = [True] * len(block.ops)
    if inputs:
        for i, op in enumerate(block.ops):
            if input_names & set(op.input_arg_names) and _has_grad(op.type):
                input_names.update(n for n in op.output_arg_names if n not in no_grad_set)
            else:
                relevant[i] = False
    for i in reversed(range(len(block.ops))):
        op = block.ops[i]
        if output_names & set(op.output_arg_names) and _has_grad(op.type):
            output_names.update(n for n in op.input_arg_names if n not in no_grad_set)
        else:
            relevant[i] = False
    path = [op for op, keep in zip(block.ops, relevant) if keep]
    if inputs:
        for op in path:
            for name in op.input_arg_names:
                if name not in input_names and block._var_recursive(name).stop_gradient:
                    no_grad_set.add(name)
    return path


def _find_no_grad_vars(block, op_path, targets, no_grad_set):
    """The outputs of `op_path` that no later op of it reads nor any target is, and that
    are not stop_gradient: they get no gradient (fluid 1.8.5's helper; ops running a
    sub-block are skipped, as there)."""
    output_names = {v.name for v in targets}
    found = set()
    for op in reversed(op_path):
        if "sub_block" not in op.attrs:
            for name in op.output_arg_names:
                if (name not in output_names and name not in op.input_arg_names
                        and not block._var_recursive(name).stop_gradient):
                    found.add(name)
        output_names.update(n for n in op.input_arg_names if n not in no_grad_set)
    return found
