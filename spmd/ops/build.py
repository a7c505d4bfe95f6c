"""Turn an `append_op` call into a validated Operator with inferred output shapes."""
from __future__ import annotations

from ..core.operator import Operator
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .lod_rules import shares_at_build
from .registry import InferContext, VarInfo, get_op_def


def _names(value, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _names(v, where)]
    if isinstance(value, Variable):
        return [value.name]
    if isinstance(value, str):
        return [value]
    raise InvalidArgumentError(
        f"{where}: expected a Variable or a name, got {type(value).__name__}")


def _bind(block, slots: dict, given: dict, where: str, kind: str) -> dict[str, list[str]]:
    unknown = set(given) - set(slots)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown {kind} slot(s) {sorted(unknown)}; expected {sorted(slots)}"
        )
    bound = {}
    for name, slot in slots.items():
        names = _names(given.get(name), f"{where} {kind} '{name}'")
        if not names and not slot.optional:
            raise InvalidArgumentError(f"{where}: {kind} '{name}' is required")
        if len(names) > 1 and not slot.duplicable:
            raise InvalidArgumentError(
                f"{where}: {kind} '{name}' takes one variable, got {len(names)}: {names}"
            )
        if names:
            bound[name] = names
    return bound


def _foreign_optional_inputs(block, opdef, given: dict) -> dict:
    """Variables of another program (not in this one) given for an optional input slot:
    fluid records the name and its kernel finds no value when the op runs, as if the slot
    were empty (rnn_memory_helper_grad's Out@GRAD: X@GRAD is zeros), so they are left out of
    the op instead of refused."""
    out = {}
    for slot, value in given.items():
        spec = opdef.input_slots.get(slot)
        if spec is None or not spec.optional:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if (isinstance(v, Variable) and v.block.program is not block.program
                    and block._find_var_recursive(v.name) is None):
                out[v.name] = v
    return out


def build_operator(block, type: str, inputs: dict, outputs: dict, attrs: dict, role,
                   position: int) -> Operator:
    opdef = get_op_def(type)
    where = f"op #{position} '{type}'"
    ins = _bind(block, opdef.input_slots, inputs, where, "input")
    outs = _bind(block, opdef.output_slots, outputs, where, "output")
    attrs = opdef.validate_attrs(attrs, where)
    foreign = _foreign_optional_inputs(block, opdef, inputs)
    for slot, names in list(ins.items()):
        for n in names:
            if block._find_var_recursive(n) is None and n not in foreign:
                # a sub-block reads its ancestors' vars
                raise InvalidArgumentError(f"{where}: input variable '{n}' is not in the block")
        if foreign and any(n in foreign for n in names):
            kept = [n for n in names if n not in foreign]
            if kept:
                ins[slot] = kept
            else:
                del ins[slot]
    for names in outs.values():
        for n in names:
            if block._find_var_recursive(n) is None:
                block.create_var(name=n, shape=(), dtype="float32")

    def info(n):
        v = block._var_recursive(n)
        return VarInfo(n, v.shape, v.dtype, v.lod_level)

    ctx = InferContext(opdef, {s: [info(n) for n in ns] for s, ns in ins.items()},
                       {s: list(ns) for s, ns in outs.items()}, attrs, where)
    opdef.infer(ctx)
    for slot, entries in ctx.results.items():
        for n, entry in zip(outs[slot], entries):
            if entry is not None:
                var = block._var_recursive(n)
                var.shape, var.dtype = entry[0], entry[1]
    _set_lod_levels(block, opdef, ins, outs, ctx.lod_levels)
    return Operator(block, type, ins, outs, attrs, role)


def _set_lod_levels(block, opdef, ins: dict, outs: dict, explicit: dict) -> None:
    """Outputs' lod_level: what shape inference set, else the input's of a share_lod pair
    (a duplicable input shares its first variable's, as fluid's sum does)."""
    for in_slot, out_slot in opdef.share_lod:
        if in_slot in ins and out_slot in outs and out_slot not in explicit:
            source = block._var_recursive(ins[in_slot][0])
            for n in outs[out_slot]:
                target = block._var_recursive(n)
                if shares_at_build(opdef.type, source.shape, target.shape):
                    target.lod_level = source.lod_level
    for slot, level in explicit.items():
        for n in outs.get(slot, ()):
            block._var_recursive(n).lod_level = level
