"""One MultiSlot text line to one record: for each slot in order, a count n > 0 then n values
(`3 12 7 9 1 0.5` is a 3-id slot then a 1-float slot).

A record is a tuple of 1-D arrays, one per slot (float32 or int64). Two readings, as fluid's
two data feeds do: the QueueDataset's (MultiSlotDataFeed) keeps every value; the
InMemoryDataset's (MultiSlotInMemoryDataFeed) drops the zeros of sparse slots (a float below
1e-6 in magnitude, a uint64 0) and, when a sparse slot is left empty, batches it as one 0.
A line that does not parse is a RecordError naming the file, the line, the slot and what was
expected against what was found; fluid would read garbage (strtof/strtoull stop silently) or
abort the process.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError

_UINT64_MAX = 2**64 - 1


class RecordError(InvalidArgumentError):
    """A line of a dataset file that is not a MultiSlot record of the declared slots."""


def _fail(where: str, slot, index: int, what: str, line: str) -> RecordError:
    shown = line if len(line) <= 200 else line[:200] + " ..."
    return RecordError(
        f"{where}: slot {index} ('{slot.name}', {slot.type}"
        f"{', dense' if slot.is_dense else ''}): {what}; the line is: {shown!r}. Each line "
        f"must hold, for every variable of set_use_var in order, a count n > 0 then n "
        f"values (MultiSlotDataGenerator writes this format)")


def _values(tokens, slot, where, index, line):
    if slot.type == "float":
        try:
            return np.array([float(t) for t in tokens], dtype=np.float32)
        except ValueError:
            bad = next(t for t in tokens if not _is_float(t))
            raise _fail(where, slot, index, f"expected a float value, got {bad!r}",
                        line) from None
    out = []
    for t in tokens:
        if not t.isdigit() or int(t) > _UINT64_MAX:
            raise _fail(where, slot, index,
                        f"expected a uint64 value (digits, at most 2**64 - 1), got {t!r}", line)
        out.append(int(t))
    # uint64 ids are fed as int64, bit for bit (fluid copies the bytes)
    return np.array(out, dtype=np.uint64).view(np.int64)


def _is_float(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def parse_line(line: str, slots, where: str, drop_zeros: bool) -> tuple:
    """The record `line` holds; `where` names it in errors ("file 'a.txt', line 3")."""
    tokens = line.split()
    pos, record = 0, []
    for index, slot in enumerate(slots):
        if pos >= len(tokens):
            raise _fail(where, slot, index,
                        f"expected the slot's count, but the line ends after {len(tokens)} "
                        f"token(s) ({len(slots)} slots declared)", line)
        count_token = tokens[pos]
        try:
            count = int(count_token)
        except ValueError:
            raise _fail(where, slot, index,
                        f"expected the slot's count (an integer > 0), got {count_token!r}",
                        line) from None
        if count <= 0:
            raise _fail(where, slot, index,
                        f"the count is {count}; it must be > 0 (pad an empty slot in the data "
                        f"generator, e.g. with one 0)", line)
        values = tokens[pos + 1:pos + 1 + count]
        if len(values) < count:
            raise _fail(where, slot, index,
                        f"the count says {count} value(s), the line has {len(values)} left",
                        line)
        if slot.is_dense and count != slot.row_size:
            raise _fail(where, slot, index,
                        f"a dense slot of shape {list(slot.shape)} takes {slot.row_size} "
                        f"value(s) per record, got {count}", line)
        array = _values(values, slot, where, index, line)
        if drop_zeros and not slot.is_dense:
            array = array[np.abs(array) >= 1e-6] if slot.type == "float" else array[array != 0]
        record.append(array)
        pos += 1 + count
    if pos != len(tokens):
        raise RecordError(
            f"{where}: {len(tokens) - pos} token(s) left after the {len(slots)} declared slots "
            f"({[s.name for s in slots]}), starting {tokens[pos]!r}; the line is "
            f"{line[:200]!r}. Declare every slot the data holds with set_use_var, in order")
    return tuple(record)
