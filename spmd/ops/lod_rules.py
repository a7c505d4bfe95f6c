"""Which ops keep their input's LoD, as fluid 1.8's ShareLoD calls in their InferShape do.

fluid's elementwise ops, activations, fc (mul), embedding (lookup_table), softmax, the
cross-entropy losses and a few more hand the LoD of an input to an output, so a sequence model
can run dense ops on the rows of a LoD tensor and still pool per sequence afterwards. Ops
defined before LoD existed here get their pairs from this table; ops written since (the
sequence ops) declare `share_lod=` in their own `define_op`. At run time a shared LoD is
passed on only when the output has as many rows as the input (spmd/executor/lod_binding.py).
The registry gives an op of the table its pairs when the op is defined (`apply`).
"""
from __future__ import annotations

# fluid's activation ops (activation_op.cc shares X's LoD with Out in every one of them)
ACTIVATION_TYPES = (
    "abs acos asin atan brelu ceil cos elu erf exp floor gelu hard_shrink hard_sigmoid "
    "hard_swish leaky_relu log log1p logsigmoid mish pow reciprocal relu relu6 round rsqrt "
    "selu sigmoid sign sin soft_relu softplus softshrink softsign sqrt square stanh swish "
    "tanh tanh_shrink thresholded_relu").split()

_X_OUT = ("X", "Out")

SHARE_LOD: dict[str, tuple[tuple[str, str], ...]] = {
    **{t: (_X_OUT,) for t in ACTIVATION_TYPES},
    **{f"elementwise_{k}": (_X_OUT,) for k in
       ("add", "sub", "mul", "div", "max", "min", "pow", "mod", "floordiv")},
    **{t: (_X_OUT,) for t in
       ("scale", "cast", "dropout", "clip", "assign", "fill_zeros_like", "fill_any_like",
        "mul", "matmul", "softmax", "sum", "concat", "one_hot", "label_smooth", "prelu",
        "sigmoid_cross_entropy_with_logits", "reshape2", "expand", "hash",
        "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")},
    "lookup_table": (("Ids", "Out"),),
    "lookup_table_v2": (("Ids", "Out"),),
    "cross_entropy": (("X", "Y"),),
    "cross_entropy2": (("X", "Y"),),
    "softmax_with_cross_entropy": (("Logits", "Softmax"), ("Logits", "Loss")),
    "batch_norm": (("X", "Y"),),
    "layer_norm": (("X", "Y"),),
    "data_norm": (("X", "Y"),),
    "cvm": (("X", "Y"),),
    "top_k": (("X", "Out"), ("X", "Indices")),
    "print": (("In", "Out"),),
    # shape ops that keep the rows (fluid shares X's LoD when dim 0 is unchanged; the run-time
    # rule "only when the output has as many rows" is lod_binding's), and row-wise ops, as
    # fluid 1.8.5 gives their outputs the input's lod_level (tests/oracle/make_behaviours.py)
    **{t: (_X_OUT,) for t in
       ("squeeze2", "unsqueeze2", "flatten2", "split", "pad", "pad2d", "pad_constant_like",
        "cos_sim", "huber_loss", "square_error_cost", "sampling_id", "pool2d", "pool3d", "lrn",
        "logical_not", "logical_and", "logical_or", "logical_xor", "equal", "not_equal",
        "greater_than", "greater_equal", "less_than", "less_equal")},
    # a gradient keeps its input's LoD where fluid's grad kernel shares it (the default
    # <type>_grad ops get their pairs from this table too)
    "reorder_lod_tensor_by_rank_grad": (("X", "X@GRAD"),),
    "split_lod_tensor_grad": (("X", "X@GRAD"),),
    "stack": (("X", "Y"),),
    "slice": (("Input", "Out"),),
    "strided_slice": (("Input", "Out"),),
    "log_loss": (("Predicted", "Loss"),),
    "group_norm": (("X", "Y"),),
    **{t: (("Input", "Output"),) for t in ("conv2d", "depthwise_conv2d", "conv3d")},
}

# ops whose fluid InferShape shares the LoD only when the output's dim 0 is the input's
# (`if (x_dims[0] == out_dims[0]) ctx->ShareLoD(...)`): unsqueeze2 at axis 0 makes it 1
ROWS_KEPT_ONLY = frozenset(("squeeze2", "unsqueeze2", "reshape2", "pad"))


def shares_at_build(op_type: str, in_shape, out_shape) -> bool:
    """Whether a share_lod pair of `op_type` gives the output the input's lod_level."""
    if op_type not in ROWS_KEPT_ONLY:
        return True
    return bool(in_shape) and bool(out_shape) and in_shape[0] == out_shape[0]


def apply(opdef) -> None:
    """Give `opdef`, if the table names it, its share_lod pairs (called as it is defined)."""
    pairs = SHARE_LOD.get(opdef.type)
    if pairs is None:
        return
    for in_slot, out_slot in pairs:
        if in_slot not in opdef.input_slots or out_slot not in opdef.output_slots:
            raise ValueError(
                f"lod_rules: op '{opdef.type}' has no input '{in_slot}' or output '{out_slot}' "
                f"(inputs {sorted(opdef.input_slots)}, outputs {sorted(opdef.output_slots)})")
    opdef.share_lod = tuple(dict.fromkeys(opdef.share_lod + pairs))
