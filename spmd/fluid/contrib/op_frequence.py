"""fluid.contrib.op_frequence: op_freq_statistic(program), how often each op type occurs in
the global block and how often each pair "producer->consumer" of adjacent ops does (through a
non-parameter variable), most frequent first. (fluid 1.8.5's own copy calls Python 2's
dict.has_key and fails on Python 3; this one runs.)

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 4], "float32")
...     y = fluid.layers.relu(fluid.layers.relu(x))
>>> op_freq_statistic(main)
([('relu', 2)], [('relu->relu', 1)])
"""
from __future__ import annotations

from collections import Counter

from ...core import Program

__all__ = ["op_freq_statistic"]


def op_freq_statistic(program):
    """(single op frequencies, adjacent pair frequencies), each a list of (name, count)."""
    if not isinstance(program, Program):
        raise TypeError(f"The input type should be Porgram. But you passed in {type(program)}")
    block = program.global_block()
    params = {p.name for p in block.all_parameters()}
    single: Counter = Counter()
    for op in block.ops:
        if any(n not in params for n in op.output_arg_names):
            single[op.type] += 1
    producers: dict[str, list[str]] = {}
    pairs: Counter = Counter()
    for op in block.ops:
        for name in op.input_arg_names:
            if name not in params and name in producers:
                pairs[f"{producers[name][-1]}->{op.type}"] += 1
        for name in op.output_arg_names:
            producers.setdefault(name, []).append(op.type)
    order = sorted  # stable: equal counts keep first-seen order, as fluid's sort does
    return (order(single.items(), key=lambda kv: kv[1], reverse=True),
            order(pairs.items(), key=lambda kv: kv[1], reverse=True))
