"""Forward values a grad op reads by name that a later forward op overwrites.

The grad ops run after the whole forward pass, so a grad op reading a value by name would see
the last value written to it: the loop counter a tensor array was written at before a While
(the loop advances it), a tensor a While then updates in place, an index incremented after a
cond. `OverwrittenValues` gives such a grad op a copy (`assign` into `<name>@SAVED@<k>`) made
where the forward op read the value. Programs that overwrite nothing a gradient reads get no
copies. Sub-block ops (while, conditional_block, recurrent) keep what they overwrite
themselves, and a gradient block's copy of a body is in SSA form, so only a program's own
block needs this.
"""
from __future__ import annotations

from ..core.operator import OpRole

_SAVED_TYPES = frozenset({"LOD_TENSOR", "LOD_TENSOR_ARRAY"})


class OverwrittenValues:
    """The copies one backward pass over `block` needs (see the module doc): `rewrite` points
    a forward op's grad-op specs at them, `insert_copies` adds the assigns, before the forward
    op for what it reads and after it for what it writes."""

    def __init__(self, block):
        self.block = block
        self.position = {id(op): i for i, op in enumerate(block.ops)}
        self.last_write: dict[str, int] = {}
        for i, op in enumerate(block.ops):
            if op.role in (OpRole.FORWARD, OpRole.LOSS):
                for n in op.output_arg_names:
                    self.last_write[n] = i
        self.saves: dict[tuple, str] = {}  # (position, after the op, name) -> copy

    def rewrite(self, op, specs: list) -> list:
        p = self.position.get(id(op))
        if p is None or not any(self.last_write.get(n, -1) > p
                                for n in op.input_arg_names + op.output_arg_names):
            return specs
        return [(t, {s: self._slot(op, p, s, names) for s, names in ins.items()}, outs, attrs)
                for t, ins, outs, attrs in specs]

    def _slot(self, op, p: int, slot: str, names: list) -> list:
        if slot in op.inputs and list(names) == op.input(slot):
            after = False
        elif slot in op.outputs and list(names) == op.output(slot):
            after = True
        else:  # gradients, or names the grad maker chose itself
            return names
        return [self._saved(p, after, n) for n in names]

    def _saved(self, p: int, after: bool, name: str) -> str:
        var = self.block._find_var_recursive(name)
        if self.last_write.get(name, -1) <= p or var is None or var.type not in _SAVED_TYPES:
            return name
        key = (p, after, name)
        if key not in self.saves:
            copy = f"{name}@SAVED@{len(self.saves)}"
            self.block.create_var(name=copy, shape=var.shape, dtype=var.dtype, type=var.type,
                                  lod_level=var.lod_level, stop_gradient=True)
            self.saves[key] = copy
        return self.saves[key]

    def insert_copies(self) -> None:
        """The copies, into the forward ops (last position first, so earlier ones stay put)."""
        for (p, after, name), copy in sorted(self.saves.items(), reverse=True):
            self.block._insert_op(p + 1 if after else p, "assign", {"X": [name]},
                                  {"Out": [copy]}, {}, role=OpRole.FORWARD)
