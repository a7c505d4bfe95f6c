"""fluid.contrib.slim.prune.pruner: Pruner and StructurePruner, which pick the channels of a
parameter with the smallest L1 norm and cut them out (or zero them, lazily), on numpy arrays.

>>> import numpy as np
>>> p = StructurePruner({"*": 0}, {"*": "l1_norm"})
>>> w = np.array([[1.0, 1.0], [0.1, 0.1], [5.0, 5.0]])
>>> idx = p.cal_pruned_idx("w", w, ratio=0.34)
>>> idx.tolist(), p.prune_tensor(w, idx, 0).tolist()
([1], [[1.0, 1.0], [5.0, 5.0]])
"""
from __future__ import annotations

import numpy as np

__all__ = ["Pruner", "StructurePruner"]


class Pruner:
    """The base of slim's pruners."""

    def prune(self, param):
        """Return `param` pruned (the base prunes nothing)."""
        return param


class StructurePruner(Pruner):
    """`pruning_axis` and `criterions`: {parameter name or '*': axis / 'l1_norm'}."""

    def __init__(self, pruning_axis, criterions):
        self.pruning_axis = pruning_axis
        self.criterions = criterions

    def cal_pruned_idx(self, name, param, ratio, axis=None):
        """The indices along `axis` of the round(size * ratio) slices with the smallest
        criterion."""
        criterion = self.criterions.get(name, self.criterions.get("*"))
        if criterion != "l1_norm":
            raise ValueError(f"StructurePruner: criterion {criterion!r} for {name}; fluid 1.8 "
                             f"has 'l1_norm'")
        if axis is None:
            if self.pruning_axis is None:
                raise ValueError("pruning_axis should set if axis is None.")
            axis = self.pruning_axis.get(name, self.pruning_axis.get("*"))
        param = np.asarray(param)
        count = int(round(param.shape[axis] * ratio))
        others = tuple(i for i in range(param.ndim) if i != axis)
        return np.abs(param).sum(axis=others).argsort(kind="stable")[:count]

    def prune_tensor(self, tensor, pruned_idx, pruned_axis, lazy=False):
        """`tensor` without the slices `pruned_idx` along `pruned_axis`, or (lazy) with them
        zeroed in place of cutting."""
        tensor = np.asarray(tensor)
        mask = np.zeros(tensor.shape[pruned_axis], dtype=bool)
        mask[np.asarray(pruned_idx, dtype=int)] = True
        if lazy:
            out = tensor.copy()
            index = [slice(None)] * tensor.ndim
            index[pruned_axis] = mask
            out[tuple(index)] = 0
            return out
        return np.compress(~mask, tensor, axis=pruned_axis)
