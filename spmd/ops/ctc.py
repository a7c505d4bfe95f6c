"""Op definitions: CTC and sequence edit distance (fluid 1.8's warpctc, ctc_align, edit_distance
and sequence_erase, which edit_distance's ignored_tokens appends).

- warpctc: the CTC loss -log p(label | logits) of each sequence, softmax over the class axis
  taken inside (Logits are unnormalized); `blank` is the blank class. LoD form: Logits
  [T, C] and Label [L, 1] (int32) with LoD; padded form: time-major Logits [T_max, N, C],
  Label [N, L_max], LogitsLength and LabelLength [N] (int64). Loss [N, 1]. WarpCTCGrad holds
  d loss / d logits, computed with the loss as warp-ctc does; the gradient op scales it by
  Loss@GRAD (and by 1 / the sequence's length when norm_by_times). A label that no
  alignment of its logits can produce (too long) gets loss 0 and gradient 0, as fluid's.
- ctc_align: merges repeated tokens (merge_repeated) then drops `blank` in each sequence of
  int tokens. LoD form: Input [T, 1] -> Output [M, 1] with the new LoD (a batch whose every
  sequence comes out empty gives fluid's single -1 row); padded form: Input [N, T] with
  InputLength [N, 1] -> Output [N, T] filled with padding_value and OutputLength [N, 1].
- edit_distance: the Levenshtein distance between each hypothesis and reference sequence of
  int64 tokens, divided by the reference length when normalized. Out [N, 1] float32,
  SequenceNum [1] int64. LoD form, or padded [N, T] with HypsLength / RefsLength [N].
- sequence_erase: the tokens listed in `tokens` removed from each sequence of X [T, 1].
"""
from __future__ import annotations

from .registry import define_op

_INTS = ("int32", "int64")


def _known(d) -> bool:
    return d >= 0


def _check_int(ctx, slot: str, dtypes=_INTS):
    v = ctx.input(slot)
    ctx.check(v.dtype in dtypes, f"{slot} ({v.name}) must be {' or '.join(dtypes)}, got "
                                 f"{v.dtype}")
    return v


@define_op("warpctc", inputs=["Logits", "Label", "LogitsLength?", "LabelLength?"],
           outputs=["WarpCTCGrad", "Loss"],
           attrs={"blank": ("int", 0), "norm_by_times": ("bool", False)},
           no_grad_inputs=("Label", "LogitsLength", "LabelLength"),
           nondiff_outputs=("WarpCTCGrad",),
           grad_uses=("Logits", "WarpCTCGrad", "LogitsLength"),
           lod_inputs=("Logits", "Label"), share_lod=(("Logits", "WarpCTCGrad"),))
def _warpctc(ctx):
    x = ctx.input("Logits")
    ctx.check(x.dtype in ("float32", "float64"),
              f"Logits ({x.name}) must be float32 or float64, got {x.dtype}")
    _check_int(ctx, "Label")
    padded = ctx.has_input("LogitsLength")
    ctx.check(padded == ctx.has_input("LabelLength"),
              "give both LogitsLength and LabelLength (padded form) or neither (LoD form)")
    if padded:
        for slot in ("LogitsLength", "LabelLength"):
            _check_int(ctx, slot, ("int64",))
        # fluid 1.8's InferShape checks no rank here (it reads dim 2 as the classes)
        ctx.check(len(x.shape) >= 3,
                  f"Logits ({x.name}) must be time-major padded [max time, batch, classes] "
                  f"with LogitsLength, got {list(x.shape)}")
    else:
        ctx.check(len(x.shape) == 2,
                  f"Logits ({x.name}) must be [total time, classes] with LoD (or padded "
                  f"[max time, batch, classes] with LogitsLength / LabelLength), got "
                  f"{list(x.shape)}")
    c = x.shape[2] if padded else x.shape[-1]
    blank = ctx.attr("blank")
    ctx.check(not _known(c) or 0 <= blank < c,
              f"blank={blank} must be a class of Logits: in [0, {c - 1}]")
    ctx.set_output("WarpCTCGrad", x.shape, x.dtype)
    ctx.set_output("Loss", (x.shape[1] if padded else -1, 1), x.dtype)
    ctx.set_lod_level("Loss", 0)


@define_op("ctc_align", inputs=["Input", "InputLength?"], outputs=["Output", "OutputLength?"],
           attrs={"blank": ("int", 0), "merge_repeated": ("bool", True),
                  "padding_value": ("int", 0)},
           grad=None, lod_inputs=("Input",), lod_outputs=("Output",))
def _ctc_align(ctx):
    x = _check_int(ctx, "Input")
    if ctx.has_input("InputLength"):
        _check_int(ctx, "InputLength")
        ctx.check(len(x.shape) == 2,
                  f"Input ({x.name}) must be padded [batch, max time] with InputLength, got "
                  f"{list(x.shape)}")
        ctx.set_output("Output", x.shape, x.dtype)
        ctx.set_output("OutputLength", (x.shape[0], 1), "int64")
        ctx.set_lod_level("Output", 0)
    else:
        ctx.set_output("Output", (-1, 1), x.dtype)
        ctx.set_lod_level("Output", max(x.lod_level, 1))


@define_op("edit_distance", inputs=["Hyps", "Refs", "HypsLength?", "RefsLength?"],
           outputs=["SequenceNum", "Out"], attrs={"normalized": ("bool", False)},
           grad=None, lod_inputs=("Hyps", "Refs"))
def _edit_distance(ctx):
    for slot in ("Hyps", "Refs"):
        _check_int(ctx, slot)
    padded = ctx.has_input("HypsLength")
    ctx.check(padded == ctx.has_input("RefsLength"),
              "give both HypsLength and RefsLength (padded form) or neither (LoD form)")
    n = ctx.input("Hyps").shape[0] if padded else -1
    ctx.set_output("Out", (n, 1), "float32")
    ctx.set_output("SequenceNum", (1,), "int64")
    ctx.set_lod_level("Out", 0)


@define_op("sequence_erase", inputs=["X"], outputs=["Out"], attrs={"tokens": ("ints", [])},
           grad=None, lod_inputs=("X",), lod_outputs=("Out",))
def _sequence_erase(ctx):
    x = _check_int(ctx, "X")
    ctx.check(len(x.shape) == 2 and x.shape[1] in (1, -1),
              f"X ({x.name}) must be [total length, 1] int tokens with LoD, got "
              f"{list(x.shape)}")
    ctx.set_output("Out", (-1, 1), x.dtype)
    ctx.set_lod_level("Out", max(x.lod_level, 1))
