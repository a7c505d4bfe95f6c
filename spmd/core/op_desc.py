"""fluid's descriptor handles as Paddle's tests drive them (`core.ProgramDesc()`,
`block.desc.var(b"x")`, `block.desc.append_op()`, `core.get_grad_op_desc(op.desc, ...)`),
answered from spmd's IR: a VarDesc handle edits the Variable it names; an OpDesc is an op not
yet in a program (a grad op made by get_grad_op_desc, or one a test is filling in slot by slot);
appended to a block, it becomes a real op of that block (built and shape-inferred by spmd's op
definition) as soon as its inputs exist there.

>>> from spmd.core.program import ProgramDesc
>>> prog = ProgramDesc()
>>> block = prog.block(0)
>>> for name in (b"x1", b"x2"):
...     block.var(name).set_shape([10, 20])
>>> out = block.var(b"out")
>>> op = block.append_op()
>>> op.set_type("sum"); op.set_input("X", ["x1", "x2"]); op.set_output("Out", ["out"])
>>> op.check_attrs(); op.infer_shape(block)
>>> out.shape()
[10, 20]
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .dtypes import VarType, convert_dtype
from .op_schema import OpSchema
from .shapes import normalize_shape

# below the IR classes (fluid_compat.py's desc views hand these out): ProgramDesc(), which makes
# a Program, is in program.py
__all__ = ["OpDesc", "VarDescHandle", "append_bound_op", "block_var", "materialize_pending"]


def _name(name) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


class VarDescHandle:
    """fluid's VarDesc of one variable: reads and edits the spmd Variable it names."""

    def __init__(self, var):
        self._var = var

    def _changed(self) -> None:
        self._var.block.program._bump()  # compiled plans depend on shapes and dtypes

    def name(self) -> str:
        return self._var.name

    def shape(self) -> list[int]:
        return list(self._var.shape)

    def set_shape(self, shape) -> None:
        self._var.shape = normalize_shape(shape, self._var.name)
        self._changed()

    def dtype(self):
        return VarType(self._var.dtype) if not isinstance(self._var.dtype, VarType) \
            else self._var.dtype

    def set_dtype(self, dtype) -> None:
        self._var.dtype = convert_dtype(dtype)
        self._changed()

    def type(self):
        return self._var.type

    def set_type(self, kind) -> None:
        self._var.type = kind
        self._changed()

    def lod_level(self) -> int:
        return self._var.lod_level

    def set_lod_level(self, level: int) -> None:
        self._var.lod_level = int(level)

    def persistable(self) -> bool:
        return self._var.persistable

    def set_persistable(self, value: bool) -> None:
        self._var.persistable = bool(value)
        self._changed()


def block_var(block, name, create: bool = True) -> VarDescHandle | None:
    """The handle of variable `name` (str or bytes) of `block`; made (unknown shape, float32,
    as fluid's BlockDesc.Var) when `create` and it does not exist."""
    name = _name(name)
    var = block._find_var_recursive(name)
    if var is None:
        if not create:
            return None
        var = block.create_var(name=name, shape=(), dtype="float32")
    return VarDescHandle(var)


class OpDesc:
    """An op described slot by slot (fluid's OpDesc). Unbound, it is a description only (what
    get_grad_op_desc returns); bound to a block (`block.desc.append_op()`), it is appended to
    that block as a real op once it has a type and its inputs exist there."""

    def __init__(self, type: str = "", inputs=None, outputs=None, attrs=None,  # noqa: A002
                 block=None):
        self._type = type
        self._inputs = {k: list(v) for k, v in (inputs or {}).items()}
        self._outputs = {k: list(v) for k, v in (outputs or {}).items()}
        self._attrs = dict(attrs or {})
        self._block = block
        self.op = None  # the block's op, once appended

    # -- reading
    def type(self) -> str:
        return self._type

    def input(self, slot: str) -> list[str]:
        return list(self._inputs.get(slot, []))

    def output(self, slot: str) -> list[str]:
        return list(self._outputs.get(slot, []))

    def input_names(self) -> list[str]:
        return list(self._inputs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def input_arg_names(self) -> list[str]:
        return [n for ns in self._inputs.values() for n in ns]

    def output_arg_names(self) -> list[str]:
        return [n for ns in self._outputs.values() for n in ns]

    def attr(self, name: str):
        return self._attrs[name]

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr_names(self) -> list[str]:
        return sorted(self._attrs)

    # -- editing
    def set_type(self, type: str) -> None:  # noqa: A002 - fluid's name
        self._type = type

    def set_input(self, slot: str, names) -> None:
        self._inputs[slot] = [_name(n) for n in names]

    def set_output(self, slot: str, names) -> None:
        self._outputs[slot] = [_name(n) for n in names]

    def _set_attr(self, name: str, value) -> None:
        self._attrs[name] = value
        if self.op is not None:
            self.op._set_attr(name, value)

    set_attr = _set_attr

    def copy_from(self, other) -> None:
        """Take `other`'s type, slots and attributes (an OpDesc or an op's desc); a bound
        desc is then appended to its block if its inputs are there."""
        self._type = other.type()
        self._inputs = {s: list(other.input(s)) for s in other.input_names()}
        self._outputs = {s: list(other.output(s)) for s in other.output_names()}
        self._attrs = {n: other.attr(n) for n in other.attr_names()}
        self.materialize()

    def check_attrs(self) -> None:
        """Check the attributes against the op's definition and fill in the defaults."""
        self._attrs = OpSchema.validate_attrs(self._type, self._attrs)

    def _slots(self) -> tuple[dict, dict]:
        # an empty slot is an unbound one (fluid's tests bind optional slots to [])
        ins = {s: ns for s, ns in self._inputs.items() if ns}
        outs = {s: ns for s, ns in self._outputs.items() if ns}
        return ins, outs

    def infer_var_type(self, block_desc=None) -> None:
        """spmd's shape inference sets each output's dtype and kind with its shape."""
        self.infer_shape(block_desc)

    def infer_shape(self, block_desc=None) -> None:
        """Infer the outputs' shapes and dtypes in `block_desc`'s block (the outputs are made
        there if missing), as fluid's OpDesc.InferShape; a bound desc is appended to its block."""
        if self._block is not None and self.materialize():
            return
        block = self._block if block_desc is None else block_desc._block
        if block is None:
            raise InvalidArgumentError(f"OpDesc('{self._type}').infer_shape: give the block "
                                       f"(block.desc) whose variables it reads")
        ins, outs = self._slots()
        OpSchema.build(block, self._type, ins, outs, dict(self._attrs), block.program.current_role,
                       len(block.ops))

    def materialize(self) -> bool:
        """Append a bound desc to its block as an op once it can be (a type, inputs there);
        True once it is in the block."""
        if self.op is not None:
            return True
        block = self._block
        if block is None or not self._type:
            return False
        ins, outs = self._slots()
        if any(block._find_var_recursive(n) is None for ns in ins.values() for n in ns):
            return False
        pending = block.__dict__.get("_pending_op_descs", [])
        if self in pending:
            pending.remove(self)
        self.op = block.append_op(self._type, ins, outs, dict(self._attrs))
        return True


def append_bound_op(block) -> OpDesc:
    """`block.desc.append_op()`: an empty desc that becomes an op of `block` when filled."""
    desc = OpDesc(block=block)
    block.__dict__.setdefault("_pending_op_descs", []).append(desc)
    return desc


def materialize_pending(program) -> None:
    """Append every filled-in desc of `program`'s blocks (fluid's Program._sync_with_cpp)."""
    for block in program.blocks:
        for desc in list(block.__dict__.get("_pending_op_descs", [])):
            desc.materialize()
