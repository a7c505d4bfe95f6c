"""What the control-flow builders share: BlockGuard (ops appended inside go into a sub-block),
what a body reads and writes (the inputs and outputs of the op running it), argument checks
(ControlFlowTypeError) and nested structures of Variables (flatten, pack, compare).
"""
from __future__ import annotations

from ..core.program import Program
from ..core.variable import Variable
from ..errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["BlockGuard", "ControlFlowTypeError", "block_io", "body_interface"]


class ControlFlowTypeError(ArgumentTypeError):
    """A control-flow layer got an argument of the wrong type (a TypeError, as in fluid)."""


def _check_var(value, what: str, where: str, dtypes=None) -> Variable:
    if not isinstance(value, Variable):
        raise ControlFlowTypeError(
            f"{where}: {what} must be a Variable, got {type(value).__name__}")
    if dtypes is not None and value.dtype not in dtypes:
        raise ControlFlowTypeError(
            f"{where}: {what} '{value.name}' must have dtype in {sorted(dtypes)}, got "
            f"{value.dtype}")
    return value


def reads_fed_lod(x, levels: int) -> None:
    """A fed variable declared without LoD (layers.data's default lod_level 0) whose LoD an op
    reads: fluid reads whatever LoD the feed carries at run time, so spmd tracks the fed LoD
    of `x` from here on (its lod_level raised to `levels`); a feed without that many levels
    then fails in the op, naming the level, as in fluid."""
    if x.is_data and x.lod_level < levels:
        x.lod_level = levels


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _check_scalar_bool(value, what: str, where: str) -> Variable:
    _check_var(value, what, where, {"bool"})
    if _numel(value.shape) not in (1, -1) and -1 not in value.shape:
        raise ControlFlowTypeError(
            f"{where}: {what} '{value.name}' must hold one element (shape [1]), got shape "
            f"{list(value.shape)}")
    return value


# -- what a body reads and writes ------------------------------------------------------------

def block_io(body) -> tuple[list, list]:
    """(names the body's ops read before writing them, names they write), each in order."""
    reads, writes, written = [], [], set()
    for op in body.ops:
        for n in op.input_arg_names:
            if n not in written and n not in reads:
                reads.append(n)
        for n in op.output_arg_names:
            written.add(n)
            if n not in writes:
                writes.append(n)
    return reads, writes


def _defined_before(parent, name: str) -> bool:
    """Whether `name` may already hold a value where the op running the body is appended."""
    var = parent._find_var_recursive(name)
    if var is None:
        return False
    if var.persistable or var.is_data:
        return True
    block = parent
    while block is not None:
        if any(name in op.output_arg_names for op in block.ops):
            return True
        block = block.parent_block
    return False


def body_interface(body, where: str, local_ok=()) -> tuple[list, list]:
    """(inputs, outputs) of the op running `body`: the outside names it reads before writing
    them, plus those it writes that already hold a value (kept when the body does not run);
    the outside names it writes."""
    parent = body.parent_block
    reads, writes = block_io(body)
    for n in reads:
        if n in body.vars and n not in local_ok:
            raise InvalidArgumentError(
                f"{where}: the body reads '{n}', a variable made inside it, before any op "
                f"writes it; compute it first, or make it outside the body")
    inputs = [n for n in reads if n not in body.vars]
    outputs = [n for n in writes if n not in body.vars]
    inputs += [n for n in outputs if n not in inputs and _defined_before(parent, n)]
    return inputs, outputs


class BlockGuard:
    """`with`: ops appended inside go into a new sub-block; `complete(body)` runs after the
    body, before the enclosing block is current again."""

    def __init__(self, program: Program, complete=None):
        if not isinstance(program, Program):
            raise ControlFlowTypeError("BlockGuard takes a Program")
        self.program, self.complete = program, complete

    def __enter__(self):
        self.body = self.program._create_block()
        return self.body

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self.complete is not None:
                self.complete(self.body)
        finally:
            self.program._rollback()
        return False



# -- nested structures of Variables -----------------------------------------------------------

def _flatten(struct) -> list:
    if isinstance(struct, (list, tuple)):
        return [v for s in struct for v in _flatten(s)]
    if isinstance(struct, dict):
        return [v for k in sorted(struct) for v in _flatten(struct[k])]
    return [struct]


def _pack(struct, flat: list):
    """`flat` (from _flatten of a structure like `struct`) in `struct`'s shape."""
    it = iter(flat)

    def build(s):
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        if isinstance(s, dict):
            return {k: build(s[k]) for k in sorted(s)}
        return next(it)
    return build(struct)


def _same_structure(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_same_structure(a[k], b[k]) for k in a)
    return not isinstance(a, (list, tuple, dict)) and not isinstance(b, (list, tuple, dict))

