"""Reading a DataFeedDesc from protobuf's text form (fluid.DataFeedDesc(proto_file)): the
fields of fluid 1.8's data_feed.proto that a MultiSlot feed has."""
from __future__ import annotations

import re
from dataclasses import replace

from ..errors import InvalidArgumentError
from .desc import DataFeedDesc
from .slots import Slot, SlotsDesc

_TOKEN = re.compile(r'\s*(?:#[^\n]*\n\s*)*("(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"]+)')
_TOP = {"name": str, "batch_size": int, "pipe_command": str, "rank_offset": str,
        "pv_batch_size": int}
_SLOT = {"name": str, "type": str, "is_dense": bool, "is_used": bool, "shape": int}


def _tokens(text: str, where: str):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or not m.group(1):
            if text[pos:].strip():
                raise InvalidArgumentError(f"{where}: cannot read {text[pos:pos + 40]!r}")
            break
        out.append(m.group(1))
        pos = m.end()
    return out


def _scalar(token: str, kind, where: str, field: str):
    try:
        if kind is str:
            if not (token.startswith('"') and token.endswith('"')):
                raise ValueError
            return bytes(token[1:-1], "utf-8").decode("unicode_escape")
        if kind is bool:
            return {"true": True, "false": False}[token]
        return int(token)
    except (ValueError, KeyError):
        raise InvalidArgumentError(
            f"{where}: field {field} takes a {kind.__name__}, got {token}") from None


def _fields(tokens, i, schema, where, nested):
    """Parse `name: value` / `name { ... }` entries from tokens[i] up to a '}' (or the end);
    returns ({field: [values]}, the index after)."""
    out: dict = {}
    while i < len(tokens) and tokens[i] != "}":
        field = tokens[i]
        if i + 1 < len(tokens) and tokens[i + 1] == "{":
            if field not in nested:
                raise InvalidArgumentError(f"{where}: unknown message field {field!r}")
            inner_schema, inner_nested = nested[field]
            value, i = _fields(tokens, i + 2, inner_schema, where, inner_nested)
            if i >= len(tokens):
                raise InvalidArgumentError(f"{where}: '{field} {{' is not closed")
            i += 1
        elif i + 2 < len(tokens) and tokens[i + 1] == ":" and field in schema:
            value = _scalar(tokens[i + 2], schema[field], where, field)
            i += 3
        else:
            raise InvalidArgumentError(
                f"{where}: unknown field or syntax at {' '.join(tokens[i:i + 3])!r}; "
                f"DataFeedDesc fields: {sorted(schema) + sorted(nested)}")
        out.setdefault(field, []).append(value)
    return out, i


def parse_desc(text: str, where: str = "DataFeedDesc") -> DataFeedDesc:
    """The DataFeedDesc that `text` (protobuf text format) describes."""
    tokens = _tokens(text, where)
    slots_schema = (_SLOT, {})
    nested = {"multi_slot_desc": ({}, {"slots": slots_schema})}
    fields, _ = _fields(tokens, 0, _TOP, where, nested)
    desc = DataFeedDesc(**{k: v[-1] for k, v in fields.items() if k in _TOP})
    desc.explicit = {k for k in fields if k in _TOP}
    slots = []
    for multi in fields.get("multi_slot_desc", []):
        for s in multi.get("slots", []):
            one = {k: v[-1] for k, v in s.items() if k != "shape"}
            slots.append(Slot(name=one.get("name", ""), type=one.get("type", ""),
                              is_dense=one.get("is_dense"), is_used=one.get("is_used"),
                              shape=tuple(s.get("shape", []))))
    desc.multi_slot_desc = SlotsDesc(slots)
    return desc


def with_slot(desc: DataFeedDesc, name: str, **changes) -> None:
    """Set fields of slot `name` of `desc` (slots are immutable: it is replaced)."""
    slots = desc.multi_slot_desc.slots
    for i, slot in enumerate(slots):
        if slot.name == name:
            slots[i] = replace(slot, **changes)
            return
    raise InvalidArgumentError(
        f"DataFeedDesc: no slot named {name!r}; the slots are {[s.name for s in slots]}")
