"""The compiled plan: a program's ops bound once to kernels and name slots, run as a flat loop.

This is also the reference semantics: ops run in program order, one kernel call each, and a
value is dropped right after its last reader. A run writes persistable variables back to the
scope only after every op succeeded, so a failed run leaves the scope as it was.
"""
from __future__ import annotations

import numpy as np

from ..core.variable import Parameter, Variable
from ..errors import ExecutionError, FeedError, PreconditionError
from ..kernels.registry import get_kernel
from ..ops.registry import get_op_def
from .feed import check_feed_names, convert_feed


class Step:
    __slots__ = ("fn", "ins", "outs", "attrs", "want", "frees", "where")

    def __init__(self, fn, ins, outs, attrs, want, frees, where):
        self.fn, self.ins, self.outs, self.attrs = fn, ins, outs, attrs
        self.want, self.frees, self.where = want, frees, where


def _bindings(slots: dict, opdef_slots: dict):
    return tuple((s, tuple(names), opdef_slots[s].duplicable) for s, names in slots.items())


class Plan:
    """Compiled for one (program version, feed names, fetch names)."""

    def __init__(self, program, feed_names, fetch_names, rng):
        block = program.global_block()
        self.block = block
        self.fetch_names = list(fetch_names)
        for n in self.fetch_names:
            block.var(n)  # raises NotFoundError naming the variable
        written: set[str] = set()
        reads_before_write: list[str] = []
        last_use: dict[str, int] = {}
        for i, op in enumerate(block.ops):
            for n in op.input_arg_names:
                if n not in written and n not in reads_before_write:
                    reads_before_write.append(n)
                last_use[n] = i
            for n in op.output_arg_names:
                written.add(n)
                last_use[n] = max(last_use.get(n, i), i)
        feed_set = set(feed_names)
        needed = [n for n in reads_before_write if block.vars[n].is_data
                  and not block.vars[n].persistable]
        self._needed_feeds = needed
        self.scope_reads = [n for n in reads_before_write if n not in feed_set]
        self.fetch_from_scope = [n for n in self.fetch_names
                                 if n not in written and n not in feed_set]
        keep = set(self.fetch_names) | {n for n, v in block.vars.items() if v.persistable}
        frees_at: dict[int, list[str]] = {}
        for n, i in last_use.items():
            if n not in keep:
                frees_at.setdefault(i, []).append(n)
        self.persist_writes = sorted(n for n in written if block.vars[n].persistable)
        self.steps = []
        for i, op in enumerate(block.ops):
            opdef = get_op_def(op.type)
            attrs = dict(op.attrs)
            if opdef.random:
                attrs["_rng"] = rng
            self.steps.append(Step(get_kernel(op.type), _bindings(op.inputs, opdef.input_slots),
                                   _bindings(op.outputs, opdef.output_slots), attrs,
                                   frozenset(op.outputs), tuple(frees_at.get(i, ())),
                                   (i, op)))

    def run(self, scope, feed: dict, xp, place):
        block = self.block
        check_feed_names(block, feed, self._needed_feeds)
        env = {name: convert_feed(block.vars[name], value, xp) for name, value in feed.items()}
        for n in self.scope_reads + self.fetch_from_scope:
            value = scope.get(n)
            if value is None:
                raise _uninitialized(block.vars[n])
            env[n] = value
        step = None
        try:
            for step in self.steps:
                ins = {}
                for slot, names, dup in step.ins:
                    ins[slot] = [env[n] for n in names] if dup else env[names[0]]
                res = step.fn(xp, ins, step.attrs, step.want)
                for slot, names, dup in step.outs:
                    if dup:
                        for n, a in zip(names, res[slot]):
                            env[n] = a
                    else:
                        env[names[0]] = res[slot]
                for n in step.frees:
                    del env[n]
        except Exception as e:  # noqa: BLE001 - re-raised with the op named
            i, op = step.where
            shapes = {n: tuple(env[n].shape) for n in op.input_arg_names
                      if n in env and hasattr(env[n], "shape")}
            raise ExecutionError(
                f"op #{i} '{op.type}' failed: {type(e).__name__}: {e}\n  op: {op}\n"
                f"  input shapes: {shapes}"
            ) from e
        for n in self.persist_writes:
            scope._assign(n, env[n])
        return [env[n] for n in self.fetch_names]


def _uninitialized(var: Variable):
    if var.persistable:
        kind = "parameter" if isinstance(var, Parameter) else "persistable variable"
        return PreconditionError(
            f"{kind} '{var.name}' has no value in the scope: run the startup program "
            f"(exe.run(fluid.default_startup_program())) or load it before running this program"
        )
    return FeedError(
        f"variable '{var.name}' is read before any op writes it and was neither fed nor set in "
        f"the scope; feed it (feed={{'{var.name}': array}})"
    )


def as_numpy(array):
    return array if isinstance(array, np.ndarray) else array.get()
