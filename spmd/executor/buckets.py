"""Persistent gradient buckets for fused all-reduce.

Each fused c_allreduce_sum of a plan gets one flat buffer, allocated on first use and reused
every step, with a view per gradient. The kernel that produces a gradient last is offered its
view as an `out=` buffer (its KernelContext's `out(xp, slot)`); kernels that can write there
(mul_grad's weight gradient: almost all the bytes of an MLP) save the packing copy. The views
are valid until the same plan's next run, so fetched gradients are copied out.
"""
from __future__ import annotations

import math


class Bucket:
    def __init__(self, shapes: list[tuple], dtype: str):
        self.shapes, self.dtype = shapes, dtype
        self._xp = None
        self.buffer = None
        self.views: list = []

    def get(self, xp):
        if self._xp is not xp:
            self.buffer = xp.empty(sum(math.prod(s) for s in self.shapes), dtype=self.dtype)
            self.views, start = [], 0
            for shape in self.shapes:
                n = math.prod(shape)
                self.views.append(self.buffer[start:start + n].reshape(shape))
                start += n
            self._xp = xp
        return self.buffer, self.views

    def view(self, index: int):
        return lambda xp: self.get(xp)[1][index]


def attach_buckets(steps, block):
    """Give every fused c_allreduce_sum step, and every flat c_reduce_scatter_owned step
    (passes/reduce_flat.py: its bucket is its send buffer, padded to equal sections), a
    Bucket, and the last writer of each of its gradients (a single-variable output slot) that
    gradient's view as its `out=` buffer."""
    last_writer: dict[str, tuple] = {}
    for step in steps:
        _, op = step.where
        flat = op.type == "c_reduce_scatter_owned" and op.attrs.get("flat")
        if (op.type == "c_allreduce_sum" and len(op.input("X")) > 1) or flat:
            names = op.input("X")
            if all(all(d >= 0 for d in block.vars[n].shape) for n in names):
                shapes = [tuple(block.vars[n].shape) for n in names]
                if flat:  # the inputs end to end, padded to nranks equal sections
                    total = sum(math.prod(shape) for shape in shapes)
                    nranks = op.attrs["nranks"]
                    shapes.append((-(-total // nranks) * nranks - total,))
                bucket = Bucket(shapes, block.vars[names[0]].dtype)
                step.ctx.bucket = bucket
                for i, n in enumerate(names):
                    writer = last_writer.get(n)
                    if writer is not None:
                        producer, slot = writer
                        producer.ctx.outputs[slot] = bucket.view(i)
        for slot, names, dup in step.outs:
            for n in names:
                last_writer[n] = None if dup or len(names) > 1 else (step, slot)
