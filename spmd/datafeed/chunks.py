"""Many MultiSlot lines at once into a RecordTable, with array operations over the chunk
instead of Python work per value: every token of the chunk is converted to a number in one
numpy call; the slots' counts are then found for all lines together, slot after slot (the
count of slot k+1 sits right after slot k's values); each slot's values are gathered from
those positions. ids are converted exactly (uint64, beyond float64's 2**53 too). A line or
value that does not fit is handed to parse.parse_line, whose error names the file, the line,
the slot and what it expected and found."""
from __future__ import annotations

import numpy as np

from .parse import RecordError, parse_line
from .table import RecordTable

_EXACT = 2.0**53  # float64 holds every integer below this exactly


def _first_bad_line(lines, slots, where, drop_zeros):
    """parse_line each line until one raises (it names the fault); the chunk then had none."""
    for lineno, line in lines:
        parse_line(line, slots, where(lineno), drop_zeros)
    raise RecordError(f"{where(lines[0][0])}...: the chunk does not parse, but no line alone "
                      f"fails; report this with the file")


def _drop_zeros(values, counts, slot):
    """The InMemory reading: a sparse slot's zeros dropped, an emptied record given one 0."""
    keep = np.abs(values) >= 1e-6 if slot.type == "float" else values != 0
    if keep.all():
        return values, counts
    record = np.repeat(np.arange(len(counts)), counts)
    values = values[keep]
    counts = np.bincount(record[keep], minlength=len(counts))
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        values = np.insert(values, starts[empty], np.zeros(empty.size, values.dtype))
        counts[empty] = 1
    return values, counts


def _ranges(starts, counts):
    """The indices starts[i] .. starts[i] + counts[i] - 1 of every i, in order."""
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])


def parse_chunk(numbered_lines, slots, where, drop_zeros: bool) -> RecordTable:
    """The records of `numbered_lines` ((line number, text) pairs); `where(n)` names line n
    in errors."""
    lines = [(n, text) for n, text in numbered_lines if text.strip()]
    if not lines:
        return RecordTable.empty(slots)
    tokens, lengths = [], []
    for _, text in lines:
        split = text.split()
        tokens.extend(split)
        lengths.append(len(split))
    try:
        numbers = np.array(tokens, dtype=np.float64)
    except ValueError:
        _first_bad_line(lines, slots, where, drop_zeros)
    ends = np.cumsum(lengths)
    pos = ends - np.asarray(lengths)
    found = []  # (value starts, counts) per slot
    for slot in slots:
        if (pos >= ends).any():
            _first_bad_line(lines, slots, where, drop_zeros)
        counts = numbers[pos]
        if ((counts <= 0) | (counts != np.floor(counts))).any() or (
                slot.is_dense and (counts != slot.row_size).any()):
            _first_bad_line(lines, slots, where, drop_zeros)
        counts = counts.astype(np.int64)
        found.append((pos + 1, counts))
        pos = pos + 1 + counts
    if (pos != ends).any():
        _first_bad_line(lines, slots, where, drop_zeros)
    values, all_counts = [], []
    for slot, (starts, counts) in zip(slots, found):
        index = _ranges(starts, counts)
        if slot.type == "float":
            array = numbers[index].astype(np.float32)
        else:
            if not isinstance(tokens, np.ndarray):
                tokens = np.array(tokens, dtype=object)  # gathered by index, in C
            array = _ids(numbers[index], index, tokens, lines, slots, where, drop_zeros)
        if drop_zeros and not slot.is_dense:
            array, counts = _drop_zeros(array, counts, slot)
        values.append(array)
        all_counts.append(counts)
    return RecordTable.from_counts(slots, values, all_counts)


def _ids(approx, index, tokens, lines, slots, where, drop_zeros):
    """A uint64 slot's values, exactly, as int64 bit for bit; every token plain digits (what
    parse_line accepts: no sign, point or exponent)."""
    if not index.size:
        return np.zeros(0, np.int64)
    picked = tokens[index].tolist()
    if not "".join(picked).isdigit():
        _first_bad_line(lines, slots, where, drop_zeros)
    if approx.max() < _EXACT:
        return approx.astype(np.int64)
    try:
        return np.array(picked, dtype=np.uint64).view(np.int64)
    except OverflowError:  # beyond 2**64 - 1
        _first_bad_line(lines, slots, where, drop_zeros)
