"""Before the first data-parallel step every process checks it compiled the same program, so a
rank that built a different model fails at once instead of hanging in a collective that the
others never reach.

One allgather of the program's digest when all is well. When the digests differ, the ranks
gather one digest per op (then per variable, when the ops agree), find the first index where
any rank differs, and exchange a description of that op or variable as JSON text: every rank
then raises the same error, naming the op, the first of its fields (input, output, attribute)
that differs, and each rank's value of it, e.g.

    first difference at op #0 mul: ranks 0-2 have Y=fc_0.w_0 [784, 128] float32, rank 3 has
    Y=fc_0.w_0 [784, 64] float32

Raw bytes over MPI: no pickle.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from ..errors import PreconditionError

_SHOWN = 160  # characters of one field's value shown in the error (the digest covers all)


def _var_text(block, name: str) -> str:
    var = block.vars.get(name)
    if var is None:
        return name
    return f"{name} {list(var.shape)} {var.dtype}"


def _slot_text(block, slot: str, names) -> str:
    texts = [_var_text(block, n) for n in names]
    return f"{slot}={texts[0] if len(texts) == 1 else '[' + ', '.join(texts) + ']'}"


def _short(text: str) -> str:
    """`text`, cut to _SHOWN characters with a digest of the whole, so two long values that
    differ past the cut still read as different."""
    if len(text) <= _SHOWN:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[:_SHOWN]}... ({len(text)} characters, sha256 {digest})"


def _value(value) -> str:
    if isinstance(value, (str, bool)):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _op_fields(block, op) -> list[list[str]]:
    """[field, value] pairs describing `op`, in the order a difference is looked for: its
    type, its inputs and outputs with their variables' shapes and dtypes, its attributes."""
    fields = [["type", op.type]]
    fields += [[f"input {s}", _slot_text(block, s, names)] for s, names in op.inputs.items()]
    fields += [[f"output {s}", _slot_text(block, s, names)] for s, names in op.outputs.items()]
    fields += [[f"attribute {k}", _short(f"{k}={_value(v)}")]
               for k, v in sorted(op.attrs.items()) if k != "op_callstack"]
    fields.append(["role", f"role={op.role.value}"])
    if op.owner is not None:
        fields.append(["owner", f"owned by rank {op.owner}"])
    return fields


def _var_fields(var) -> list[list[str]]:
    return [[k, _short(f"{k}={_value(v)}")] for k, v in var.to_dict().items()]


def _digests(records: list) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.sha256(json.dumps(r).encode()).digest()[:8],
                                    "little", signed=True) for r in records], dtype=np.int64)


def _first_difference(mpi, records: list):
    """(the first index at which any rank's record differs, every rank's record count), or
    None when all agree. A rank with fewer records differs where its list ends."""
    digests = _digests(records)
    counts = mpi.allgather(np.array([len(digests)], dtype=np.int64))[:, 0]
    padded = np.full(int(counts.max()) + 1, -1, dtype=np.int64)
    padded[:len(digests)] = digests
    table = mpi.allgather(padded)
    differs = np.nonzero((table != table[0]).any(axis=0))[0]
    if not len(differs):
        return None
    return int(differs[0]), [int(c) for c in counts]


def _allgather_text(mpi, text: str) -> list[str]:
    """Every rank's `text` (UTF-8; lengths first, then one padded buffer each)."""
    data = text.encode()
    lengths = mpi.allgather(np.array([len(data)], dtype=np.int64))[:, 0]
    buffer = np.zeros(int(lengths.max()), dtype=np.uint8)
    buffer[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    rows = mpi.allgather(buffer)
    return [bytes(row[:n]).decode(errors="replace") for row, n in zip(rows, lengths)]


def _ranks(ranks: list[int]) -> str:
    """'rank 3', 'ranks 0-2', 'ranks 0, 2, 5'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


def _grouped(values: list[str]) -> list[tuple[list[int], str]]:
    """(ranks, value) for each distinct value, in the order of the lowest rank holding it."""
    groups: dict[str, list[int]] = {}
    for rank, value in enumerate(values):
        groups.setdefault(value, []).append(rank)
    return [(ranks, value) for value, ranks in groups.items()]


def _who_has(values: list[str]) -> str:
    return ", ".join(f"{_ranks(r)} {'has' if len(r) == 1 else 'have'} {v}"
                     for r, v in _grouped(values))


def _field_difference(records: list) -> str:
    """Each rank's value of the first field on which the ranks' records differ."""
    order: list[str] = []
    for record in records:
        order += [f for f, _ in record if f not in order]
    maps = [dict(record) for record in records]
    for field in order:
        values = [m.get(field, f"no {field}") for m in maps]
        if len(set(values)) > 1:
            return _who_has([f"type {v}" if field == "type" else v for v in values])
    return "the same fields in another order"


def _text(kind: str, record: list) -> str:
    """An op as 'mul(X=x [-1, 8] float32, ...) -> Out=...; attrs'; a variable's fields."""
    if kind != "op":
        return "; ".join(v for _, v in record)
    parts = {"input": [], "output": [], "attribute": []}
    for field, value in record:
        group = field.split(" ", 1)[0]
        if field != "type" and value != "role=forward":
            parts.get(group, parts["attribute"]).append(value)
    return (f"{dict(record)['type']}({', '.join(parts['input'])}) -> "
            f"{', '.join(parts['output'])}; {', '.join(parts['attribute'])}")


def _described(kind: str, index: int, records: list, counts: list[int]) -> tuple[str, str]:
    """(a one-line summary naming the first differing field, a listing of each distinct
    record with the ranks holding it)."""
    missing = [f"no {kind} #{index} ({c} {kind}s in all)" for c in counts]
    if any(r is None for r in records):  # a rank's list ends before this index
        summary = _who_has([missing[i] if r is None else
                            f"type {dict(r)['type']}" if kind == "op" else dict(r)["name"]
                            for i, r in enumerate(records)])
    else:
        summary = _field_difference(records)
    texts = [missing[i] if r is None else _text(kind, r) for i, r in enumerate(records)]
    listing = "\n".join(f"    {_ranks(r)}: {t}" for r, t in _grouped(texts))
    return summary, listing


def check_same_program(program, mpi) -> None:
    """Compare `program` across the processes of `mpi` (an MPICommunicator); when any rank's
    differs, raise PreconditionError on every rank, naming the first differing op (or
    variable) and each rank's value of its first differing field.

    >>> # check_same_program(compiled_program, MPICommunicator())  # collective: every rank
    """
    mine = np.frombuffer(bytes.fromhex(program.fingerprint()), dtype=np.uint8).copy()
    everyone = mpi.allgather(mine)
    if (everyone == everyone[0]).all():
        return
    block = program.global_block()
    kind, records = "op", [_op_fields(block, op) for op in block.ops]
    found = _first_difference(mpi, records)
    if found is None:  # same ops: a variable no op shows differs (persistable, need_clip...)
        kind = "variable"
        records = [_var_fields(v) for v in sorted(block.vars.values(), key=lambda v: v.name)]
        found = _first_difference(mpi, records)
    if found is None:
        raise PreconditionError(
            f"{mpi.describe()} the ranks compiled different programs: the ops and variables "
            f"agree, but the order the variables were created in or the gradient / "
            f"optimizer-state maps differ; every rank must build the same model from the same "
            f"script")
    index, counts = found
    mine_record = records[index] if index < len(records) else None
    everyone_records = [json.loads(t) for t in _allgather_text(mpi, json.dumps(mine_record))]
    summary, listing = _described(kind, index, everyone_records, counts)
    name = _label(kind, index, everyone_records)
    raise PreconditionError(
        f"{mpi.describe()} the ranks compiled different programs, so their collectives would "
        f"not match: first difference at {name}: {summary}. Every rank must build the same "
        f"model from the same script (look for a size, a flag or a branch that depends on the "
        f"rank or the host). The first differing {kind} on each rank:\n{listing}")


def _label(kind: str, index: int, records: list) -> str:
    """'op #7 mul' ('op #7' when the ranks' types differ); 'variable fc_0.w_0' ('variable #3
    (in name order)' when the names differ)."""
    field = "type" if kind == "op" else "name"
    values = {None if r is None else dict(r)[field] for r in records}
    if kind == "op":
        return f"op #{index} {values.pop()}" if len(values) == 1 else f"op #{index}"
    if len(values) == 1:
        return f"variable {values.pop().split('=', 1)[1]}"
    return f"variable #{index} (in name order)"
