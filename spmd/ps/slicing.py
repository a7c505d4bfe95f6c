"""Parameter-server mode's placement: how variables are cut into row blocks (fluid 1.8's
slice_variable) and which pserver gets each block (RoundRobin, HashName).

A variable of `numel` elements is cut into at most `slice_count` blocks of at least
`min_block_size` elements: split_count = min(slice_count, max(1, numel // min_block_size));
the block size ceil(numel / split_count) is rounded up to a whole number of rows (the product
of the dims after the first), and the last block takes what remains.

>>> [b.size for b in slice_variable([("w", (100, 200))], 2, 8192)]
[10000, 10000]
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class VarBlock:
    """Block `index` of variable `name`: `size` elements, `rows` rows of `shape`."""

    name: str
    index: int
    size: int
    shape: tuple

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape) if shape else 1


def slice_variable(named_shapes, slice_count: int, min_block_size: int) -> list[VarBlock]:
    """The blocks of each (name, shape) in order, as fluid 1.8's slice_variable cuts them."""
    blocks = []
    for name, shape in named_shapes:
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(
                f"DistributeTranspiler: variable '{name}' has shape {list(shape)} with an "
                f"unknown dim; parameters and their gradients need known shapes to be cut "
                f"into blocks")
        numel = _numel(shape)
        split_count = min(slice_count, max(1, numel // min_block_size))
        block_size = math.ceil(numel / split_count)
        width = _numel(shape[1:]) if len(shape) >= 2 else 1
        if len(shape) >= 2 and block_size % width:
            block_size += width - block_size % width
        split_count = math.ceil(numel / block_size)
        for i in range(split_count):
            size = min(block_size, numel - i * block_size)
            rows = size // width if len(shape) >= 2 else size
            blocks.append(VarBlock(name, i, size, (rows,) + shape[1:]))
    return blocks


def block_var_name(name: str, index: int | None, trainer_id: int | None) -> str:
    """fluid's names: `w.block0`, `w@GRAD.block1.trainer_0`, `w@GRAD.trainer_1`."""
    out = name if index is None else f"{name}.block{index}"
    return out if trainer_id is None else f"{out}.trainer_{trainer_id}"


def varname_parts(name: str) -> tuple[str, str, str]:
    """(original name, "blockN" or "", "trainer_N" or "") of a block variable's name."""
    t = name.find(".trainer_")
    trainer = name[t + 1:] if t >= 0 else ""
    end = t if t >= 0 else len(name)
    b = name.find(".block")
    block = name[b + 1:end] if b >= 0 else ""
    return name[:min(b if b >= 0 else len(name), end)], block, trainer


class PSDispatcher:
    """Base of the placements: `dispatch(varlist)` returns one endpoint per variable (anything
    with a `.name`); `reset()` starts over. Subclass it for a placement of your own and pass
    the class as DistributeTranspilerConfig.split_method."""

    def __init__(self, pserver_endpoints):
        self._eps = list(pserver_endpoints)
        self._step = 0

    @property
    def eps(self) -> list[str]:
        return self._eps

    def reset(self):
        self._step = 0

    def dispatch(self, varlist) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must define dispatch(varlist)")


class RoundRobin(PSDispatcher):
    """Variables to endpoints in turn (fluid's default).

    >>> [ep for ep in RoundRobin(["a:1", "b:2"]).dispatch([VarBlock("w", 0, 1, (1,))] * 3)]
    ['a:1', 'b:2', 'a:1']
    """

    def dispatch(self, varlist):
        out = []
        for _ in varlist:
            out.append(self._eps[self._step])
            self._step = (self._step + 1) % len(self._eps)
        return out


class HashName(PSDispatcher):
    """A variable's endpoint from crc32 of its name, so every process places it alike (fluid
    1.8's HashName used Python's per-process `hash()`, and fails under the transpiler)."""

    def dispatch(self, varlist):
        return [self._eps[zlib.crc32(v.name.encode()) % len(self._eps)] for v in varlist]
