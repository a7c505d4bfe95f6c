"""Op definitions: the linear-chain CRF (fluid 1.8's linear_chain_crf and crf_decoding) and
chunk_eval, the chunk precision / recall of a tagger.

Transition [D + 2, D] holds, as in fluid, the start weights (row 0), the end weights (row 1)
and the tag-to-tag weights w[i, j] from tag i to tag j (rows 2..D+1). The score of a tag path
y over emissions x is
    s(y) = start[y_0] + sum_t x_t[y_t] + sum_t w[y_{t-1}, y_t] + end[y_L-1]
and LogLikelihood is, despite its name, the negative log-likelihood log Z - s(label) per
sequence [N, 1] (what fluid returns and minimizes). crf_decoding's ViterbiPath is the path of
highest score, or, given Label, 1 where it agrees with the label and 0 elsewhere.

Two input forms, as in fluid 1.8: a LoD Emission [T, D] with Label [T, 1] (one sequence per
LoD segment), or padded Emission [N, T, D] with Label [N, T] (or [N, T, 1]) and Length [N]
(padded positions are ignored; crf_decoding writes 0 there).

chunk_eval counts the chunks of Inference and Label (int64 tags) under a scheme: tag =
label % tag types and chunk type = label / tag types (IOB: B 0, I 1; IOE: I 0, E 1; IOBES: B 0,
I 1, E 2, S 3; plain: one tag), num_chunk_types * tag types being "outside". A chunk is
correct when both its bounds and its type agree.
"""
from __future__ import annotations

from .registry import define_op

# scheme -> (tag types, begin, inside, end, single), -1 = the scheme has no such tag
CHUNK_SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
                 "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def _known(d) -> bool:
    return d >= 0


def _check_transition(ctx, d: int):
    x, w = ctx.input("Emission"), ctx.input("Transition")
    ctx.check(w.dtype == x.dtype,
              f"Transition ({w.name}) has dtype {w.dtype} but Emission has {x.dtype}")
    ok = len(w.shape) == 2 and (not _known(d) or tuple(w.shape) in ((d + 2, d), (-1, d)))
    ctx.check(ok, f"Transition ({w.name}) must be [tags + 2, tags] = [{d + 2}, {d}] (start "
                  f"row, end row, then tag-to-tag weights), got {list(w.shape)}")


def _emission(ctx) -> int:
    """Checks Emission's rank against the input form; returns the number of tags."""
    x = ctx.input("Emission")
    ctx.check(x.dtype in ("float32", "float64"),
              f"Emission ({x.name}) must be float32 or float64, got {x.dtype}")
    if ctx.has_input("Length"):
        ctx.check(len(x.shape) == 3,
                  f"Emission ({x.name}) must be padded [batch, max length, tags] when Length "
                  f"is given, got {list(x.shape)}")
        length = ctx.input("Length")
        ctx.check(length.dtype == "int64", f"Length ({length.name}) must be int64, got "
                                           f"{length.dtype}")
    else:
        ctx.check(len(x.shape) == 2,
                  f"Emission ({x.name}) must be [total steps, tags] with LoD (or padded "
                  f"[batch, max length, tags] with a Length input), got {list(x.shape)}")
    return x.shape[-1]


def _check_label(ctx, slot: str = "Label"):
    y = ctx.input(slot)
    ctx.check(y.dtype == "int64", f"{slot} ({y.name}) must be int64 tags, got {y.dtype}")


@define_op("linear_chain_crf", inputs=["Emission", "Transition", "Label", "Length?"],
           outputs=["Alpha", "EmissionExps", "TransitionExps", "LogLikelihood"],
           no_grad_inputs=("Label", "Length"),
           nondiff_outputs=("Alpha", "EmissionExps", "TransitionExps"),
           grad_uses=("Emission", "Transition", "Label", "Length"),
           lod_inputs=("Emission",),
           share_lod=(("Emission", "Alpha"), ("Emission", "EmissionExps")))
def _linear_chain_crf(ctx):
    d = _emission(ctx)
    _check_transition(ctx, d)
    _check_label(ctx)
    x, w = ctx.input("Emission"), ctx.input("Transition")
    ctx.set_output("Alpha", x.shape, x.dtype)
    ctx.set_output("EmissionExps", x.shape, x.dtype)
    ctx.set_output("TransitionExps", w.shape, x.dtype)
    n = x.shape[0] if ctx.has_input("Length") else -1
    ctx.set_output("LogLikelihood", (n, 1), x.dtype)
    ctx.set_lod_level("LogLikelihood", 0)


@define_op("crf_decoding", inputs=["Emission", "Transition", "Label?", "Length?"],
           outputs=["ViterbiPath"], grad=None, lod_inputs=("Emission",),
           share_lod=(("Emission", "ViterbiPath"),))
def _crf_decoding(ctx):
    d = _emission(ctx)
    _check_transition(ctx, d)
    if ctx.has_input("Label"):
        _check_label(ctx)
    x = ctx.input("Emission")
    shape = x.shape[:2] if ctx.has_input("Length") else (x.shape[0], 1)
    ctx.set_output("ViterbiPath", shape, "int64")


@define_op("chunk_eval", inputs=["Inference", "Label", "SeqLength?"],
           outputs=["Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
                    "NumCorrectChunks"],
           attrs={"num_chunk_types": "int", "chunk_scheme": ("str", "IOB"),
                  "excluded_chunk_types": ("ints", [])},
           grad=None, lod_inputs=("Inference", "Label"))
def _chunk_eval(ctx):
    scheme = ctx.attr("chunk_scheme")
    ctx.check(scheme in CHUNK_SCHEMES,
              f"chunk_scheme '{scheme}' is not one of {sorted(CHUNK_SCHEMES)}")
    ctx.check(ctx.attr("num_chunk_types") > 0,
              f"num_chunk_types must be positive, got {ctx.attr('num_chunk_types')}")
    for slot in ("Inference", "Label"):
        _check_label(ctx, slot)
    if ctx.has_input("SeqLength"):
        _check_label(ctx, "SeqLength")
    for slot in ("Precision", "Recall", "F1-Score"):
        ctx.set_output(slot, (1,), "float32")
    for slot in ("NumInferChunks", "NumLabelChunks", "NumCorrectChunks"):
        ctx.set_output(slot, (1,), "int64")
        ctx.set_lod_level(slot, 0)
