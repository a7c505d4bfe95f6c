"""fluid.debugger: readable listings of a program (pprint_program_codes, pprint_block_codes,
repr_var, repr_op, ...), draw_block_graphviz, and a NaN/Inf-checked run
(prepare_fast_nan_inf_debug, run_fast_nan_inf_debug). fluid's repr_* read protobuf
descriptors; spmd's take the IR's own Variables and Operators.

>>> import spmd.fluid as fluid
>>> main = fluid.Program()
>>> with fluid.program_guard(main, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32")
...     y = fluid.layers.fill_constant([2], "float32", 1.0)
>>> print(pprint_block_codes(main.global_block()).splitlines()[0])
// block-0  parent--1
>>> repr_op(main.global_block().ops[0]).split(" [")[0]
'fill_constant_0.tmp_0 = 1.0'
"""
from __future__ import annotations

import re

from ..core.program import default_main_program
from .graphviz import GraphPreviewGenerator

__all__ = ["draw_block_graphviz", "pprint_block_codes", "pprint_program_codes",
           "prepare_fast_nan_inf_debug", "repr_attr", "repr_data_type", "repr_lodtensor",
           "repr_op", "repr_selected_rows", "repr_tensor", "repr_tensor_array", "repr_var",
           "run_fast_nan_inf_debug"]

_DTYPES = ["bool", "int16", "int32", "int64", "float16", "float32", "float64"]


def repr_data_type(type) -> str:  # noqa: A002 - fluid's name
    """A dtype code (VarType.FP32 = 5, ...) or name as its name."""
    return _DTYPES[int(type)] if isinstance(type, int) else str(type)


def repr_tensor(var) -> str:
    return f"tensor(type={var.dtype}, shape={list(var.shape)})"


def repr_lodtensor(var):
    if var.type != "LOD_TENSOR":
        return None
    kind = "LoDTensor" if var.lod_level > 0 else "Tensor"
    detail = (f"level={var.lod_level}, {repr_tensor(var)}" if var.lod_level > 0
              else repr_tensor(var))
    return f"{kind} {var.name} ({detail})"


def repr_selected_rows(var):
    return f"SelectedRows {var.name} ({repr_tensor(var)})" if var.type == "SELECTED_ROWS" \
        else None


def repr_tensor_array(var):
    if var.type != "LOD_TENSOR_ARRAY":
        return None
    return f"TensorArray {var.name} (level={var.lod_level}, {repr_tensor(var)})"


def repr_var(var):
    for handler in (repr_lodtensor, repr_selected_rows, repr_tensor_array):
        text = handler(var)
        if text:
            return text
    return f"{var.type} {var.name}"


def repr_attr(name: str, value) -> tuple[str, tuple]:
    """("name=value", (name, value)), a dtype attribute by its name."""
    if name in ("dtype", "out_dtype", "in_dtype"):
        value = repr_data_type(value)
    return f"{name}={value}", (name, value)


def repr_op(op) -> str:
    """`outputs = type(inputs) [{attrs}]`; fill_constant as `out = value [shape=...]`."""
    def value(args):
        return args[0] if len(args) == 1 else str(list(args))

    outputs = [value(op.output(s)) for s in op.output_names]
    if op.type == "fill_constant":
        return f"{','.join(outputs)} = {op.attr('value')} [shape={op.attr('shape')}]"
    inputs = [f"{s}={value(op.input(s))}" for s in op.input_names]
    attrs = [repr_attr(k, v)[0] for k, v in sorted(op.attrs.items())]
    return f"{', '.join(outputs)} = {op.type}({', '.join(inputs)}) [{{{','.join(attrs)}}}]"


def _is_backward(op) -> bool:
    return op.type.endswith("_grad") or any(
        "@GRAD" in n for n in op.input_arg_names + op.output_arg_names)


def pprint_block_codes(block, show_backward: bool = False) -> str:
    """The block's variables and ops, one per line (without the backward pass unless
    show_backward)."""
    variables = [repr_var(v) for n, v in block.vars.items() if show_backward or "@GRAD" not in n]
    ops = [repr_op(op) for op in block.ops if show_backward or not _is_backward(op)]
    return (f"// block-{block.idx}  parent-{block.parent_idx}\n// variables\n"
            + "\n".join(variables) + "\n\n// operators\n" + "\n".join(ops) + "\n")


def pprint_program_codes(program) -> str:
    return "\n".join(pprint_block_codes(b) for b in program.blocks)


def draw_block_graphviz(block, highlights=None, path: str = "./temp.dot"):
    """Write `block` as a Graphviz graph at `path` (and a PDF where `dot` is installed);
    names matching one of the `highlights` regular expressions are drawn orange."""
    graph = GraphPreviewGenerator("some graph")

    def lit(name):
        return any(re.match(p, name) for p in highlights or ())

    nodes = {}
    for name, var in block.vars.items():
        nodes[name] = (graph.add_param(name, var.type, highlight=lit(name)) if var.persistable
                       else graph.add_arg(name, highlight=lit(name)))
    for op in block.ops:
        op_node = graph.add_op(op.type, highlight=lit(op.type))
        for names, outward in ((op.input_arg_names, False), (op.output_arg_names, True)):
            for n in names:
                if n not in nodes:
                    nodes[n] = graph.add_arg(n, highlight=lit(n))
                ends = (op_node, nodes[n]) if outward else (nodes[n], op_node)
                graph.add_edge(*ends, highlight=lit(op.type) or lit(n))
    return graph(path, show=False)


def prepare_fast_nan_inf_debug(_program=None) -> None:
    """Check every op's outputs for NaN and Inf from the next run on (fluid adds a sum op
    per variable for it; spmd's executor checks each output itself: FLAGS_check_nan_inf)."""
    from .device import set_flags

    set_flags({"FLAGS_check_nan_inf": True})


def run_fast_nan_inf_debug(executor, program=None, feed=None, fetch_list=None,
                           feed_var_name="feed", fetch_var_name="fetch", scope=None,
                           return_numpy=True, use_program_cache=False, dump_core=True):
    """executor.run with the NaN/Inf check on: the first op producing one fails, naming
    itself and the variable; the error is printed and raised."""
    prepare_fast_nan_inf_debug(program or default_main_program())
    try:
        return executor.run(program=program, feed=feed, fetch_list=fetch_list,
                            feed_var_name=feed_var_name, fetch_var_name=fetch_var_name,
                            scope=scope, return_numpy=return_numpy,
                            use_program_cache=use_program_cache)
    except Exception as exc:
        print("catch an exception:")
        print(exc)
        raise
