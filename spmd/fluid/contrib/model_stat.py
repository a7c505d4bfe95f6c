"""fluid.contrib.model_stat: summary(main_prog), the table of each conv2d / pool2d / fc /
activation / batch_norm op's input and output shapes, parameters and FLOPs, with fluid 1.8's
counting (a conv's multiply-adds count twice; an fc is a mul whose output is named fc*;
an activation counts its known dims, where fluid 1.8.5's count goes negative with the batch's
-1), and the totals. Printed as fluid prints it (without the prettytable package fluid needs).

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     img = fluid.data("img", [None, 3, 8, 8], "float32")
...     y = fluid.layers.conv2d(img, 4, 3, act="relu")
>>> rows, (params, flops) = summary(main)          # doctest: +ELLIPSIS
+-----+...
>>> rows[0]["type"], rows[0]["PARAMs"], params
('conv2d', 108, 108)
"""
from __future__ import annotations

import math

__all__ = ["summary"]

_ACTIVATIONS = ("sigmoid", "tanh", "relu", "leaky_relu", "prelu")


def _shape(vars_, name) -> tuple:
    return tuple(vars_[name].shape)


def _count(vars_, op):
    """(input shape, output shape, params, flops) of one op, or None for an op not counted."""
    if op.type in ("conv2d", "depthwise_conv2d"):
        c_out, c_in, k_h, k_w = _shape(vars_, op.input("Filter")[0])
        out = _shape(vars_, op.output("Output")[0])
        kernel = k_h * k_w * (c_in / op.attr("groups"))
        bias = 1 if op.input("Bias") else 0
        params = c_out * (kernel + bias)
        return (_shape(vars_, op.input("Input")[0]), out, int(params),
                int(2 * out[2] * out[3] * c_out * (kernel + bias)))
    if op.type == "pool2d":
        out = _shape(vars_, op.output("Out")[0])
        k = op.attr("ksize")
        return _shape(vars_, op.input("X")[0]), out, 0, out[1] * out[2] * out[3] * k[0] * k[1]
    if op.type == "mul":
        if "fc" not in op.output("Out")[0]:
            return None
        k_in, k_out = _shape(vars_, op.input("Y")[0])
        return (_shape(vars_, op.input("X")[0]), _shape(vars_, op.output("Out")[0]),
                k_in * k_out + 1, k_in * k_out)
    if op.type in _ACTIVATIONS:
        shape = _shape(vars_, op.input("X")[0])
        # over the known dims: fluid 1.8.5 multiplies the batch's -1 in and reports a
        # negative count
        return (shape, _shape(vars_, op.output("Out")[0]), 1 if op.type == "prelu" else 0,
                math.prod(d for d in shape if d > 0))
    if op.type == "batch_norm":
        shape = _shape(vars_, op.input("X")[0])
        return shape, _shape(vars_, op.output("Y")[0]), shape[1] * 2, shape[1] * shape[2] * (
            shape[3]) * 2
    return None


def summary(main_prog):
    """Print the table and the totals; returns (rows, (total params, total flops))."""
    rows = []
    for block in main_prog.blocks:
        for op in block.ops:
            counted = _count(block.vars, op)
            if counted is not None:
                rows.append({"type": op.type, "input_shape": counted[0][1:],
                             "out_shape": counted[1][1:], "PARAMs": counted[2],
                             "FLOPs": counted[3]})
    params = sum(r["PARAMs"] for r in rows)
    flops = sum(r["FLOPs"] for r in rows)
    header = ("No.", "TYPE", "INPUT", "OUTPUT", "PARAMs", "FLOPs")
    table = [header] + [(str(i), r["type"], str(r["input_shape"]), str(r["out_shape"]),
                         str(r["PARAMs"]), str(r["FLOPs"])) for i, r in enumerate(rows)]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule, _line(table[0], widths), rule]
    lines += [_line(row, widths) for row in table[1:]] + [rule]
    print("\n".join(lines))
    print(f"Total PARAMs: {params}({params / 1e9:.4f}G)")
    print(f"Total FLOPs: {flops}({flops / 1e9:.2f}G)")
    return rows, (params, flops)


def _line(row, widths) -> str:
    return "| " + " | ".join(cell.rjust(w) for cell, w in zip(row, widths)) + " |"
