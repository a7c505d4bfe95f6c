"""Op definitions: the losses over a tree or a sample of the classes: hierarchical_sigmoid
(fluid's hsigmoid), nce and sample_logits (sampled_softmax_with_cross_entropy).

>>> # OP_DEFS["nce"].attrs["sampler"].default  -> 0 (uniform)
"""
from __future__ import annotations

from .nn import INT_DTYPES, _check_float, _dims_match
from .registry import define_op

NCE_SAMPLERS = (0, 1, 2)  # uniform, log_uniform, custom_dist


def _code_length(num_classes: int) -> int:
    """The longest path of fluid's default tree: the bit length of num_classes - 1."""
    return max(int(num_classes - 1).bit_length(), 1)


@define_op("hierarchical_sigmoid",
           inputs=["X", "W", "Label", "PathTable?", "PathCode?", "Bias?"],
           outputs=["Out", "PreOut", "W_Out?"],
           no_grad_inputs=("Label", "PathTable", "PathCode"),
           nondiff_outputs=("PreOut", "W_Out"),
           grad_uses=("X", "W", "Label", "PathTable", "PathCode", "Bias", "PreOut"),
           attrs={"num_classes": ("int", 2), "remote_prefetch": ("bool", False),
                  "trainer_id": ("int", 0), "height_sections": ("ints", []),
                  "epmap": ("strs", []), "table_names": ("strs", []),
                  "is_sparse": ("bool", False)})
def _hsigmoid(ctx):
    x, w, label = ctx.input("X"), ctx.input("W"), ctx.input("Label")
    _check_float(ctx, x, "X")
    ctx.check(len(x.shape) == 2, f"X must be [N, D], got {list(x.shape)}")
    ctx.check(label.dtype in INT_DTYPES, f"Label must be int64, got {label.dtype}")
    ctx.check(len(w.shape) == 2 and _dims_match(w.shape[1:], x.shape[1:]),
              f"W must be [nodes, D] with D = {x.shape[1]}, got {list(w.shape)}")
    custom = ctx.has_input("PathTable")
    ctx.check(custom == ctx.has_input("PathCode"),
              "give both PathTable and PathCode (a custom tree), or neither (the default tree)")
    if custom:
        table, code = ctx.input("PathTable"), ctx.input("PathCode")
        ctx.check(len(table.shape) == 2 and _dims_match(table.shape, code.shape),
                  f"PathTable{list(table.shape)} and PathCode{list(code.shape)} must both be "
                  f"[N, L]")
        length = table.shape[1]
    else:
        n = ctx.attr("num_classes")
        ctx.check(n >= 2, f"num_classes must be >= 2 with the default tree, got {n}")
        length = _code_length(n)
    if ctx.has_input("Bias"):
        b = ctx.input("Bias")
        ctx.check(_dims_match(b.shape, (w.shape[0], 1)),
                  f"Bias must be [{w.shape[0]}, 1] (one per row of W), got {list(b.shape)}")
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)
    ctx.set_output("PreOut", (x.shape[0], length), x.dtype)
    ctx.set_output("W_Out", w.shape, w.dtype)


@define_op("nce", inputs=["Input", "Label", "Weight", "Bias?", "SampleWeight?",
                          "CustomDistProbs?", "CustomDistAlias?", "CustomDistAliasProbs?"],
           outputs=["Cost", "SampleLogits", "SampleLabels"], random=True,
           no_grad_inputs=("Label", "SampleWeight", "CustomDistProbs", "CustomDistAlias",
                           "CustomDistAliasProbs"),
           nondiff_outputs=("SampleLogits", "SampleLabels"),
           grad_uses=("Input", "Weight", "Bias", "SampleWeight", "CustomDistProbs",
                      "SampleLogits", "SampleLabels"),
           attrs={"num_total_classes": ("int", 0), "num_neg_samples": ("int", 10),
                  "sampler": ("int", 0), "seed": ("int", 0), "is_sparse": ("bool", False),
                  "remote_prefetch": ("bool", False), "trainer_id": ("int", 0),
                  "height_sections": ("ints", []), "epmap": ("strs", []),
                  "table_names": ("strs", []), "custom_neg_classes": ("ints", [])})
def _nce(ctx):
    x, label, w = ctx.input("Input"), ctx.input("Label"), ctx.input("Weight")
    _check_float(ctx, x, "Input")
    ctx.check(len(x.shape) == 2, f"Input must be [N, D], got {list(x.shape)}")
    ctx.check(label.dtype in INT_DTYPES and len(label.shape) == 2,
              f"Label must be int64 [N, num_true], got {label.dtype} {list(label.shape)}")
    k = ctx.attr("num_total_classes")
    ctx.check(_dims_match(w.shape, (k, x.shape[1])),
              f"Weight must be [num_total_classes, D] = [{k}, {x.shape[1]}], got "
              f"{list(w.shape)}")
    ctx.check(ctx.attr("sampler") in NCE_SAMPLERS,
              f"sampler must be 0 (uniform), 1 (log_uniform) or 2 (custom_dist), got "
              f"{ctx.attr('sampler')}")
    if ctx.attr("sampler") == 2:
        ctx.check(ctx.has_input("CustomDistProbs"),
                  "sampler 2 (custom_dist) needs the CustomDistProbs input")
    ctx.check(ctx.attr("num_neg_samples") >= 1,
              f"num_neg_samples must be >= 1, got {ctx.attr('num_neg_samples')}")
    width = label.shape[1] + ctx.attr("num_neg_samples") if label.shape[1] >= 0 else -1
    ctx.set_output("Cost", (x.shape[0], 1), x.dtype)
    ctx.set_output("SampleLogits", (x.shape[0], width), x.dtype)
    ctx.set_output("SampleLabels", (x.shape[0], width), "int64")


@define_op("sample_logits",
           inputs=["Logits", "Labels", "CustomizedSamples?", "CustomizedProbabilities?"],
           outputs=["Samples", "Probabilities", "SampledLogits", "SampledLabels", "LogitsDim?",
                    "LabelsDim?"], random=True,
           no_grad_inputs=("Labels", "CustomizedSamples", "CustomizedProbabilities"),
           nondiff_outputs=("Samples", "Probabilities", "SampledLabels", "LogitsDim",
                            "LabelsDim"),
           grad_uses=("Logits", "Samples"),
           attrs={"use_customized_samples": ("bool", False), "uniq": ("bool", True),
                  "remove_accidental_hits": ("bool", True), "num_samples": ("int", 1),
                  "seed": ("int", 0)})
def _sample_logits(ctx):
    logits, labels = ctx.input("Logits"), ctx.input("Labels")
    _check_float(ctx, logits, "Logits")
    ctx.check(len(logits.shape) == 2, f"Logits must be [N, K], got {list(logits.shape)}")
    ctx.check(labels.dtype in INT_DTYPES and len(labels.shape) == 2,
              f"Labels must be int64 [N, NT], got {labels.dtype} {list(labels.shape)}")
    nt, s = labels.shape[1], ctx.attr("num_samples")
    if ctx.attr("use_customized_samples"):
        ctx.check(ctx.has_input("CustomizedSamples") and
                  ctx.has_input("CustomizedProbabilities"),
                  "use_customized_samples=True needs CustomizedSamples and "
                  "CustomizedProbabilities")
        width = ctx.input("CustomizedSamples").shape[1]
    else:
        ctx.check(s >= 1, f"num_samples must be >= 1, got {s}")
        ctx.check(logits.shape[1] < 0 or s <= logits.shape[1],
                  f"num_samples={s} exceeds the {logits.shape[1]} classes of Logits")
        width = nt + s if nt >= 0 else -1
    n = logits.shape[0]
    ctx.set_output("Samples", (n, width), "int64")
    ctx.set_output("Probabilities", (n, width), logits.dtype)
    ctx.set_output("SampledLogits", (n, width), logits.dtype)
    ctx.set_output("SampledLabels", (n, nt), "int64")
    ctx.set_output("LogitsDim", (2,), "int64")
    ctx.set_output("LabelsDim", (2,), "int64")
