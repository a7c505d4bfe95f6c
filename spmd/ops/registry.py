"""Op definitions: slots, typed attributes, shape/dtype inference and the gradient policy.

An op is defined once, by decorating its shape-inference function:

    @define_op("relu", inputs=["X"], outputs=["Out"])
    def _relu(ctx):
        ctx.set_output("Out", ctx.input("X").shape, ctx.input("X").dtype)

Slot names ending in "*" are duplicable (a list of variables), ending in "?" optional.
`grad="default"` also defines `relu_grad`, whose inputs are the forward inputs, the forward
outputs and `Out@GRAD`, and whose outputs are `X@GRAD` (shaped like X); its kernel is registered
as "relu_grad" in spmd/kernels. `grad=None` marks an op with no gradient; a callable is a custom
grad maker (see spmd/autodiff).
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError, NotFoundError
from ..lazy import LazyTable, defining_module, read_index
from ..record import FrozenRecord, Record
from . import lod_rules

GRAD_SUFFIX = "@GRAD"
REQUIRED = object()  # an attribute default meaning "the user must give it"


class Slot(FrozenRecord):
    """An op's input or output slot: its name, whether it takes a list, whether it may be
    left unbound."""

    __slots__ = ("name", "duplicable", "optional")
    _fields = __slots__

    def __init__(self, name: str, duplicable: bool = False, optional: bool = False):
        self.name, self.duplicable, self.optional = name, duplicable, optional

    @staticmethod
    def parse(spec: str) -> Slot:
        if spec.endswith("*"):
            return Slot(spec[:-1], duplicable=True, optional=True)
        if spec.endswith("?"):
            return Slot(spec[:-1], optional=True)
        return Slot(spec)


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _block_index(v):
    """The index a block attribute names: a Block (its idx), a BlockDesc view (its id) or an int;
    None for anything else."""
    if _is_int(v):
        return int(v)
    idx = getattr(v, "idx", None) if hasattr(v, "ops") else None
    if idx is None and hasattr(v, "op_size"):
        idx = getattr(v, "id", None)
    return int(idx) if _is_int(idx) else None


# kind -> (check, coerce)
_ATTR_KINDS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], Any]]] = {
    "int": (lambda v: _is_int(v) or (isinstance(v, bool)), int),
    "float": (_is_number, float),
    "bool": (lambda v: isinstance(v, (bool, numbers.Integral)) and v in (0, 1, True, False), bool),
    "str": (lambda v: isinstance(v, str), str),
    "ints": (lambda v: isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
             lambda v: [int(x) for x in v]),
    "floats": (lambda v: isinstance(v, (list, tuple)) and all(_is_number(x) for x in v),
               lambda v: [float(x) for x in v]),
    "strs": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
             lambda v: [str(x) for x in v]),
    "any": (lambda v: True, lambda v: v),
    # a block attribute (fluid's BLOCK / BLOCKS): given as a Block, its desc or an index; the IR
    # keeps the index, Operator.attr / all_attrs hand back the block as fluid does
    "block": (lambda v: _block_index(v) is not None, lambda v: _block_index(v)),
    "blocks": (lambda v: isinstance(v, (list, tuple)) and all(_block_index(x) is not None
                                                              for x in v),
               lambda v: [_block_index(x) for x in v]),
    "dtype": (lambda v: _is_dtype(v), lambda v: _dtype_name(v)),
}


def _dtype_name(v):
    from ..core.dtypes import VarType, convert_dtype

    return convert_dtype(VarType(v) if _is_int(v) else v)


def _is_dtype(v) -> bool:
    try:
        _dtype_name(v)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not a dtype"
        return False


class AttrSpec(Record):
    """An attribute's kind (a key of _ATTR_KINDS) and default (REQUIRED: the user gives it)."""

    __slots__ = ("kind", "default")
    _fields = __slots__

    def __init__(self, kind: str, default: Any = REQUIRED):
        self.kind, self.default = kind, default

    def __hash__(self):
        return hash(self.kind)  # the default may be a list


class OpDef:
    """What spmd knows of one op type, declared by define_op where the op is defined. A plain
    class (see spmd/record.py); lod_rules.apply completes share_lod after it is made."""

    def __init__(self, type: str, inputs: tuple, outputs: tuple, attrs: dict,
                 infer: Callable, grad: Any = "default", no_grad_inputs: frozenset = frozenset(),
                 nondiff_outputs: frozenset = frozenset(), grad_uses: tuple | None = None,
                 random: bool = False, collective: bool = False, side_effects: bool = False,
                 movable: bool = False, row_separable: bool = False,
                 passes_inputs_through: bool = False, job_kind: str | None = None,
                 forward_type: str | None = None, share_lod: tuple = (),
                 lod_inputs: frozenset = frozenset(), lod_outputs: frozenset = frozenset(),
                 no_need_buffer: frozenset = frozenset()):
        self.type = type
        self.inputs: tuple[Slot, ...] = inputs
        self.outputs: tuple[Slot, ...] = outputs
        self.attrs: dict[str, AttrSpec] = attrs
        self.infer = infer
        self.grad = grad  # "default" | None | callable grad maker
        self.no_grad_inputs = no_grad_inputs  # slots never differentiated (labels, ids)
        self.nondiff_outputs = nondiff_outputs  # outputs whose gradient is never needed
        self.grad_uses = grad_uses  # forward slots the grad op reads; None = all
        self.random = random  # kernel draws from the program's random generator
        # kernel talks to other ranks (through its context's ctx.comm); a plan with one marks
        # its run as having started collectives (executor/plan.py)
        self.collective = collective
        # acts outside its outputs (user Python, files, the network): the SSA executor keeps
        # it in program order (executor/ssa.py)
        self.side_effects = side_effects
        # an elementwise optimizer update touching only its own slots and drawing nothing:
        # memory_optimize may run it right after its gradient is done
        self.movable = movable
        # acts on each row of its operands independently: Reduce mode
        # (passes/reduce_mode.py) and the pserver may run it on a chunk of rows
        self.row_separable = row_separable
        # its outputs are its inputs, unchanged (a wait): a value it "writes" is still the one
        # before it (a fused bucket's view stays the view)
        self.passes_inputs_through = passes_inputs_through
        # "module:class": a program whose global block holds this op runs as that kind of job
        # (executor/job.py; parameter-server mode's pserver and trainer)
        self.job_kind = job_kind
        self.forward_type = forward_type  # set on generated *_grad defs
        # LoD (spmd/core/lod.py): (input slot, output slot) pairs whose output keeps the
        # input's LoD, as fluid's ShareLoD; slots whose LoD the kernel reads (`ins["X@LOD"]`)
        # or writes (`res["Out@LOD"]`)
        self.share_lod: tuple[tuple[str, str], ...] = share_lod
        self.lod_inputs = lod_inputs
        self.lod_outputs = lod_outputs
        # input slots whose values the kernel reads only for shape, dtype, ndim and size
        # (fluid's DECLARE_NO_NEED_BUFFER_VARS_INFERER): the plan may drop their buffers before
        # the op runs and give the kernel a stand-in (spmd/executor/stand_in.py)
        self.no_need_buffer = no_need_buffer
        self.input_slots: dict[str, Slot] = {s.name: s for s in inputs}
        self.output_slots: dict[str, Slot] = {s.name: s for s in outputs}

    def __repr__(self) -> str:
        return f"OpDef({self.type!r})"

    def validate_attrs(self, attrs: dict, where: str) -> dict:
        """Return a complete, coerced attribute dict or raise naming the bad attribute."""
        unknown = set(attrs) - set(self.attrs) - _COMMON_ATTRS - _ROLE_ATTRS
        if unknown:
            raise InvalidArgumentError(
                f"{where}: unknown attribute(s) {sorted(unknown)}; "
                f"op '{self.type}' takes {sorted(self.attrs) or 'no attributes'}"
            )
        out = {}
        for name, spec in self.attrs.items():
            if name not in attrs or attrs[name] is None:
                if spec.default is REQUIRED:
                    raise InvalidArgumentError(f"{where}: attribute '{name}' is required")
                value = spec.default
                out[name] = list(value) if isinstance(value, list) else value
                continue
            value = attrs[name]
            check, coerce = _ATTR_KINDS[spec.kind]
            if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
                value = value.item()  # numpy scalars
            if not check(value):
                raise InvalidArgumentError(
                    f"{where}: attribute '{name}' expects {spec.kind}, got {value!r} "
                    f"({type(value).__name__})"
                )
            out[name] = coerce(value)
        for name in _COMMON_ATTRS & set(attrs):
            out[name] = attrs[name]
        return out


# Attributes any op may carry (fluid sets them on every op); not validated per op.
_COMMON_ATTRS = frozenset({"op_namescope", "op_callstack", "op_device"})
# fluid's role attributes (Paddle's op tests set op_role by hand): spmd keeps an op's role as
# a field of the op (its program's current role when appended), so these are accepted and dropped
_ROLE_ATTRS = frozenset({"op_role", "op_role_var"})

# op type -> OpDef; an op module is imported when an op it defines is first looked up (the
# generated op_index.py says which module defines which op; spmd.lazy.write_indexes())
OP_DEFS: LazyTable = LazyTable("op", lambda: read_index("spmd.ops.op_index"), "spmd.ops")


def _parse_attrs(attrs: dict | None) -> dict[str, AttrSpec]:
    parsed = {}
    for name, spec in (attrs or {}).items():
        if isinstance(spec, AttrSpec):
            parsed[name] = spec
        else:
            kind, default = spec if isinstance(spec, tuple) else (spec, REQUIRED)
            if kind not in _ATTR_KINDS:
                raise ValueError(
                    f"attribute kind {kind!r} of '{name}' is not one of {sorted(_ATTR_KINDS)}")
            parsed[name] = AttrSpec(kind, default)
    return parsed


def define_op(type: str, inputs=(), outputs=(), attrs=None, grad="default", no_grad_inputs=(),
              nondiff_outputs=(), grad_uses=None, random=False, collective=False,
              share_lod=(), lod_inputs=(), lod_outputs=(), grad_no_need_buffer=(),
              side_effects=False, movable=False, row_separable=False,
              passes_inputs_through=False, job_kind=None):
    """Decorator registering an op whose shape inference is the decorated function.

    LoD: `share_lod` pairs (input slot, output slot) give the output the input's LoD (and
    lod_level); `lod_inputs` / `lod_outputs` name the slots whose LoD the kernel reads as
    `ins[slot + "@LOD"]` / returns as `res[slot + "@LOD"]` (its shape inference then sets
    the outputs' lod_level with `ctx.set_lod_level`). `grad_no_need_buffer`: the forward slots
    the generated `<type>_grad` kernel reads only for their shapes (its `no_need_buffer`).
    `side_effects`, `movable`, `row_separable`, `passes_inputs_through`, `job_kind`: the
    OpDef fields of those names (the generated grad op shares `side_effects`)."""
    origin = defining_module()

    def register(infer):
        if OP_DEFS.registered(type):
            raise ValueError(f"op '{type}' is defined twice")
        opdef = OpDef(type, tuple(Slot.parse(s) for s in inputs),
                      tuple(Slot.parse(s) for s in outputs), _parse_attrs(attrs), infer, grad,
                      frozenset(no_grad_inputs), frozenset(nondiff_outputs),
                      tuple(grad_uses) if grad_uses is not None else None, random,
                      collective, share_lod=tuple(tuple(p) for p in share_lod),
                      lod_inputs=frozenset(lod_inputs), lod_outputs=frozenset(lod_outputs),
                      side_effects=side_effects, movable=movable, row_separable=row_separable,
                      passes_inputs_through=passes_inputs_through, job_kind=job_kind)
        lod_rules.apply(opdef)
        OP_DEFS.register(type, opdef, origin)
        if grad == "default":
            _define_default_grad(opdef, origin, frozenset(grad_no_need_buffer))
        elif grad_no_need_buffer:
            raise ValueError(f"op '{type}': grad_no_need_buffer needs the default grad op")
        return infer

    return register


def grad_var_name(name: str) -> str:
    return name + GRAD_SUFFIX


def _define_default_grad(fwd: OpDef, origin: str, no_need_buffer: frozenset = frozenset()):
    """`<type>_grad`: reads forward slots (all, or `grad_uses`) and output grads, writes input
    grads shaped like the inputs."""
    used = fwd.grad_uses
    fwd_slots = [s for s in fwd.inputs + fwd.outputs if used is None or s.name in used]
    ins = [Slot(s.name, s.duplicable, True) for s in fwd_slots]
    ins += [Slot(grad_var_name(s.name), s.duplicable, True)
            for s in fwd.outputs if s.name not in fwd.nondiff_outputs]
    outs = [Slot(grad_var_name(s.name), s.duplicable, True)
            for s in fwd.inputs if s.name not in fwd.no_grad_inputs]

    def infer_grad(ctx):
        for slot in outs:
            ctx.set_output_like(slot.name, slot.name[: -len(GRAD_SUFFIX)])

    # a collective forward (sync_batch_norm) has a collective gradient too; a sequence op's
    # gradient reads the LoD its forward read or wrote (gradients themselves carry none)
    read = {s.name for s in ins}
    if not no_need_buffer <= read:
        raise ValueError(f"op '{fwd.type}_grad': no-need-buffer slots "
                         f"{sorted(no_need_buffer - read)} are not among its inputs {sorted(read)}")
    gdef = OpDef(fwd.type + "_grad", tuple(ins), tuple(outs), dict(fwd.attrs), infer_grad, None,
                 random=fwd.random, collective=fwd.collective, side_effects=fwd.side_effects,
                 forward_type=fwd.type,
                 lod_inputs=(fwd.lod_inputs | fwd.lod_outputs) & read,
                 no_need_buffer=no_need_buffer)
    lod_rules.apply(gdef)
    OP_DEFS.register(gdef.type, gdef, origin)


def get_op_def(type: str) -> OpDef:
    try:
        return OP_DEFS[type]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(type, OP_DEFS, n=3)  # iterating loads every op
        hint = f"; did you mean {close}?" if close else ""
        raise NotFoundError(
            f"no op named '{type}'{hint} ({len(OP_DEFS)} ops are defined: see spmd.ops.OP_DEFS)"
        ) from None


class VarInfo(Record):
    """What shape inference sees of a variable: its name, shape (-1 = unknown), dtype and
    lod_level (how many levels of LoD it carries at run time)."""

    __slots__ = ("name", "shape", "dtype", "lod_level")
    _fields = __slots__

    def __init__(self, name: str, shape: tuple, dtype: str, lod_level: int = 0):
        self.name, self.shape, self.dtype, self.lod_level = name, shape, dtype, lod_level


class InferContext:
    """Handed to an op's shape-inference function; writes shapes/dtypes of the output vars."""

    def __init__(self, opdef: OpDef, inputs: dict, outputs: dict, attrs: dict, where: str):
        self.opdef, self._inputs, self._outputs = opdef, inputs, outputs
        self.attrs, self.where = attrs, where
        self.results: dict[str, list[tuple[tuple, str]]] = {}
        self.lod_levels: dict[str, int] = {}  # output slot -> lod_level set by set_lod_level

    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def has_output(self, slot: str) -> bool:
        return bool(self._outputs.get(slot))

    def input(self, slot: str) -> VarInfo | None:
        vs = self._inputs.get(slot) or []
        return vs[0] if vs else None

    def inputs(self, slot: str) -> list[VarInfo]:
        return list(self._inputs.get(slot) or [])

    def attr(self, name: str):
        return self.attrs[name]

    def num_outputs(self, slot: str) -> int:
        return len(self._outputs.get(slot) or [])

    def set_output(self, slot: str, shape, dtype, index: int | None = None):
        n = self.num_outputs(slot)
        if n == 0:
            return  # optional output not bound
        shape = tuple(int(d) for d in shape)
        entries = self.results.setdefault(slot, [None] * n)
        for i in range(n) if index is None else [index]:
            entries[i] = (shape, dtype)

    def set_lod_level(self, slot: str, level: int):
        """The lod_level of every output of `slot` (an op that writes LoD, or drops it)."""
        self.lod_levels[slot] = int(level)

    def set_output_like(self, out_slot: str, in_slot: str):
        """Each output of `out_slot` gets the shape and dtype of the same-index input."""
        for i, info in enumerate(self.inputs(in_slot)[: self.num_outputs(out_slot)]):
            if info is not None:
                self.set_output(out_slot, info.shape, info.dtype, index=i)

    def fail(self, message: str):
        raise InvalidArgumentError(f"{self.where}: {message}")

    def check(self, condition: bool, message: str):
        if not condition:
            self.fail(message)


def broadcast_dim(a: int, b: int) -> int:
    """Broadcast two dims where -1 means unknown."""
    if a == -1 or b == -1:
        return b if a == 1 else a if b == 1 else -1
    return max(a, b)
