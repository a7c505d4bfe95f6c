"""What the data-parallel passes share: the trained (param, grad) pairs in the order the
backward pass finishes them, and placing new ops right after a given op."""
from __future__ import annotations

from ..core.operator import Operator, OpRole
from ..core.variable import Parameter


def trained_params_grads(program) -> list[tuple[Parameter, str]]:
    """(parameter, gradient name) for every parameter an optimize op updates from its gradient,
    ordered by when the backward pass writes the gradient for the last time (so buckets fill,
    and their collectives start, as early as possible)."""
    block = program.global_block()
    optimize_reads = {n for op in block.ops if op.role is OpRole.OPTIMIZE
                      for n in op.input_arg_names}
    pairs = []
    for name, grad in program.grad_var_map.items():
        var = block.vars.get(name)
        if isinstance(var, Parameter) and var.trainable and grad in optimize_reads:
            pairs.append((var, grad))
    last = last_writer(block)
    return sorted(pairs, key=lambda pg: (last.get(pg[1], -1), pg[0].name))


def last_writer(block) -> dict[str, int]:
    """var name -> index of the last op that writes it."""
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            last[n] = i
    return last


def first_index(block, role: OpRole) -> int:
    """Index of the first op with `role`, or len(ops) when there is none."""
    return next((i for i, op in enumerate(block.ops) if op.role is role), len(block.ops))


def make_op(block, type_: str, inputs: dict, outputs: dict, attrs: dict, role: OpRole,
            owner=None) -> Operator:
    """A validated op that is not yet placed in block.ops (see place_after)."""
    op = block.append_op(type_, inputs, outputs, attrs, role=role)
    block.ops.pop()
    op.owner = owner
    return op


def mark_inline_collectives(block):
    """Set use_calc_stream on every collective with no compute op between it and the next
    c_sync_comm_stream (or the end of the program): nothing could overlap it, so it runs
    inline rather than on the communication thread."""
    inline = True  # walking backwards: no compute op seen since the last sync / the end
    for op in reversed(block.ops):
        if op.type == "c_sync_comm_stream":
            inline = True
        elif op.role is OpRole.COMMUNICATE and "use_calc_stream" in op.attrs:
            op.attrs["use_calc_stream"] = inline
        else:
            inline = False


def check_waits(block):
    """Every value an asynchronous collective writes is read only after a c_sync_comm_stream
    (or the end of the run): a pass that breaks this would read a half-reduced buffer."""
    in_flight: set[str] = set()
    for i, op in enumerate(block.ops):
        if op.type == "c_sync_comm_stream":
            in_flight.clear()
        elif op.role is OpRole.COMMUNICATE and "use_calc_stream" in op.attrs:
            if not op.attrs["use_calc_stream"]:
                in_flight.update(op.output_arg_names)
        else:
            early = in_flight.intersection(op.input_arg_names)
            if early:
                raise AssertionError(
                    f"data-parallel rewrite error: op #{i} '{op.type}' reads {sorted(early)} "
                    f"before the collective writing it is waited for")


def place_after(block, after: dict[int, list[Operator]], before_end: list[Operator] = ()):
    """Rebuild block.ops with after[i] placed right after op i (-1: at the start) and
    before_end at the end."""
    ops = list(after.get(-1, []))
    for i, op in enumerate(block.ops):
        ops.append(op)
        ops.extend(after.get(i, []))
    ops.extend(before_end)
    block.ops = ops
    block.program._bump()
