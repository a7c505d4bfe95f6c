"""Op definitions: tensors made from attributes or scalars (range, linspace, eye, diag,
assign_value, fill_constant_batch_size_like). None of them has a gradient."""
from __future__ import annotations

from .registry import define_op


def _scalar_inputs(ctx, slots):
    for s in slots:
        v = ctx.input(s)
        ctx.check(tuple(v.shape) in ((1,), (-1,), ()),
                  f"input {s} ('{v.name}') must hold one value (shape [1]), got {list(v.shape)}")


@define_op("range", inputs=["Start", "End", "Step"], outputs=["Out"], grad=None)
def _range(ctx):
    _scalar_inputs(ctx, ["Start", "End", "Step"])
    ctx.set_output("Out", (-1,), ctx.input("Start").dtype)  # the length is a run-time value


@define_op("linspace", inputs=["Start", "Stop", "Num"], outputs=["Out"], grad=None)
def _linspace(ctx):
    _scalar_inputs(ctx, ["Start", "Stop", "Num"])
    ctx.set_output("Out", (-1,), ctx.input("Start").dtype)


@define_op("eye", outputs=["Out"], grad=None,
           attrs={"num_rows": ("int", 0), "num_columns": ("int", -1),
                  "dtype": ("dtype", "float32")})
def _eye(ctx):
    rows, cols = ctx.attr("num_rows"), ctx.attr("num_columns")
    ctx.check(rows >= 0, f"num_rows must be >= 0, got {rows}")
    ctx.set_output("Out", (rows, rows if cols == -1 else cols), ctx.attr("dtype"))


@define_op("diag", inputs=["Diagonal"], outputs=["Out"], grad=None)
def _diag(ctx):
    d = ctx.input("Diagonal")
    ctx.check(len(d.shape) == 1, f"Diagonal must be 1-D, got shape {list(d.shape)}")
    ctx.set_output("Out", (d.shape[0], d.shape[0]), d.dtype)


@define_op("assign_value", outputs=["Out"], grad=None,
           attrs={"shape": ("ints", []), "dtype": ("dtype", "float32"),
                  "bool_values": ("ints", []), "fp32_values": ("floats", []),
                  "int32_values": ("ints", []), "int64_values": ("ints", [])})
def _assign_value(ctx):
    shape = ctx.attr("shape")
    n = 1
    for d in shape:
        n *= d
    given = max(len(ctx.attr(k)) for k in ("bool_values", "fp32_values", "int32_values",
                                           "int64_values"))
    ctx.check(given == n, f"shape {shape} needs {n} values, got {given}")
    ctx.set_output("Out", shape, ctx.attr("dtype"))


def batch_size_like_shape(ctx) -> list:
    """`shape` with dim output_dim_idx replaced by Input's dim input_dim_idx (fluid's
    *_batch_size_like rule)."""
    x, shape = ctx.input("Input"), list(ctx.attr("shape"))
    i, o = ctx.attr("input_dim_idx"), ctx.attr("output_dim_idx")
    ctx.check(0 <= i < len(x.shape), f"input_dim_idx={i} is out of range for Input "
                                     f"{list(x.shape)}")
    ctx.check(0 <= o < len(shape), f"output_dim_idx={o} is out of range for shape {shape}")
    shape[o] = x.shape[i]
    return shape


_BATCH_LIKE = {"shape": ("ints", []), "input_dim_idx": ("int", 0),
               "output_dim_idx": ("int", 0), "dtype": ("dtype", "float32")}


@define_op("fill_constant_batch_size_like", inputs=["Input"], outputs=["Out"], grad=None,
           lod_inputs=("Input",),  # a LoD input's batch is its number of sequences, as fluid
           attrs={**_BATCH_LIKE, "value": ("float", 0.0), "str_value": ("str", ""),
                  "force_cpu": ("bool", False)})
def _fill_constant_batch_size_like(ctx):
    ctx.set_output("Out", batch_size_like_shape(ctx), ctx.attr("dtype"))


BATCH_LIKE_ATTRS = _BATCH_LIKE
