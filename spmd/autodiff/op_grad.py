"""fluid's core.get_grad_op_desc: the grad ops of one op, made by spmd's grad makers (the ones
append_backward uses) and returned as OpDescs (spmd/core/op_desc.py) outside any block, with
fluid's names: every input's gradient `x@GRAD`, every output's gradient read from `out@GRAD`.
Paddle's op tests append them to a block by hand (`block.desc.append_op().copy_from(desc)`)."""
from __future__ import annotations

from ..core.op_desc import OpDesc, _name
from ..errors import InvalidArgumentError
from ..ops.registry import GRAD_SUFFIX, OP_DEFS, get_op_def
from .backward import GradContext, _grad_maker

__all__ = ["get_grad_op_desc", "has_grad_op_maker"]


def has_grad_op_maker(op_type: str) -> bool:
    """Whether spmd's op `op_type` has a gradient (a grad op or a grad maker)."""
    if op_type not in OP_DEFS:
        return False
    from .double_grad import GRAD_OP_GRAD_MAKERS  # a grad op differentiated again

    return get_op_def(op_type).grad is not None or op_type in GRAD_OP_GRAD_MAKERS


def _op_of(op_desc):
    op = getattr(op_desc, "_op", None) or getattr(op_desc, "op", None)
    if op is None:
        raise InvalidArgumentError(
            "get_grad_op_desc: expected the desc of an op in a block (op.desc), got "
            f"{type(op_desc).__name__}; append the op to a block first")
    return op


def get_grad_op_desc(op_desc, no_grad_set, grad_sub_block_list=()):
    """fluid's core.get_grad_op_desc: the grad ops of one op (as OpDescs, not in any block)
    made by spmd's grad maker, and {grad var name: forward var name}. Every input's gradient is
    named `x@GRAD` and every output's gradient is read from `out@GRAD`, as fluid's makers
    name them; `no_grad_set` holds names whose gradient is not wanted."""
    op = _op_of(op_desc)
    maker = _grad_maker(op)
    if maker is None:
        return [], {}
    no_grad = {_name(n) for n in (no_grad_set or ())}
    needs = {n for n in op.input_arg_names if n not in no_grad}
    ctx = GradContext(needs, lambda key: key[0] + GRAD_SUFFIX, op.block, frozenset(no_grad))
    specs = maker(op, ctx)
    renamed = {g: fwd + GRAD_SUFFIX for g, fwd in ctx.grad_of.items()
               if "@RENAME@" in g}
    descs, grad_to_var = [], {}
    for type_, ins, outs, attrs in specs:
        outs = {s: [renamed.get(n, n) for n in ns] for s, ns in outs.items()}
        descs.append(OpDesc(type_, ins, outs, attrs))
    for g, fwd in ctx.grad_of.items():
        grad_to_var[renamed.get(g, g)] = fwd
    for d in descs:
        for n in d.input_arg_names():
            if n.endswith(GRAD_SUFFIX) and n not in grad_to_var:
                grad_to_var[n] = n[: -len(GRAD_SUFFIX)]
    return descs, grad_to_var
