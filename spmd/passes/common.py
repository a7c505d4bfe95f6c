"""What the data-parallel passes share: the context a compile gives them, the trained
(param, grad) pairs in the order the backward pass finishes them, placing new ops right after a
given op, and the pass that finishes the gradient collectives."""
from __future__ import annotations

from typing import Any

from ..core.operator import Operator, OpRole
from ..core.program import Program
from ..core.variable import Parameter
from ..record import Record
from .registry import register_pass


class PassContext(Record):
    """What one data-parallel compile gives its passes, and what they leave for later ones.

    >>> ctx = PassContext(program=Program(), strategy=None, num_devices=1, loss_name=None)
    >>> ctx.training
    False
    """

    __slots__ = ("program", "strategy", "num_devices", "loss_name", "bucket_mb", "sharding",
                 "collectives_added")
    _fields = __slots__

    def __init__(self, program: Program, strategy: Any, num_devices: int,
                 loss_name: str | None, bucket_mb: float = 32.0, sharding: Any = None,
                 collectives_added: bool = False):
        self.program = program
        self.strategy = strategy  # a BuildStrategy (or fleet's subclass of it)
        self.num_devices = num_devices  # every place of every process
        self.loss_name = loss_name  # None: a program without a backward pass (a test program)
        # fused collectives' bucket size (FLAGS_fuse_parameter_memory_size)
        self.bucket_mb = bucket_mb
        self.sharding = sharding  # Reduce mode: where the optimizer state lives (StateSharding)
        self.collectives_added = collectives_added  # set by a pass that inserted collectives

    @property
    def training(self) -> bool:
        """The program has the backward pass of `loss_name` (else it only runs forward)."""
        return self.loss_name is not None

    def params_grads(self) -> list[tuple[Parameter, str]]:
        """trained_params_grads of the program as it is now."""
        return trained_params_grads(self.program)

    def aggregates_gradients(self) -> bool:
        """Training on more than one device with trained parameters: gradients cross places."""
        return self.training and self.num_devices > 1 and bool(self.params_grads())

    def reads_lod_data(self) -> bool:
        """The program's ops read a data variable with LoD (its batch is dealt out by whole
        sequences, so places may hold different numbers of rows)."""
        block = self.program.global_block()
        read = {n for op in block.ops for n in op.input_arg_names}
        return any(v.is_data and v.lod_level > 0 and n in read for n, v in block.vars.items())


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


# after every pass that adds collectives, before anything that only looks at the result
@register_pass("finish_collectives", order=90, when=lambda ctx: ctx.collectives_added)
def finish_collectives_pass(ctx) -> None:
    """mark_inline_collectives, then check_waits, on the program's global block."""
    mark_inline_collectives(ctx.program.global_block())
    check_waits(ctx.program.global_block())
