"""Op definitions: the recurrent ops over the sequences of a LoD tensor (fluid 1.8's lstm and
lstmp, the ops of fluid.layers.dynamic_lstm and dynamic_lstmp; gru, of dynamic_gru, is
defined in sequence_gru.py beside its kernel, with the formulas below).

Each runs one recurrence per sequence of Input (rows offsets[i]:offsets[i+1] of its last LoD
level), backwards in time when is_reverse. Input holds the already projected step inputs:

- lstm: Input [T, 4D], gate blocks in fluid's order (candidate c~, input i, forget f, output
  o); Weight [D, 4D] the hidden-to-gate weight in the same order; Bias [1, 4D] (+ [1, 3D] of
  peephole weights w_ic, w_fc, w_oc when use_peepholes). H0 / C0 [N, D] are the initial states
  of the N sequences.
      i = act_gate(x_i + h W_i + w_ic * c_prev)    f = act_gate(x_f + h W_f + w_fc * c_prev)
      c = act_cand(x_c + h W_c) * i + c_prev * f   o = act_gate(x_o + h W_o + w_oc * c)
      h = o * act_cell(c)
- lstmp: lstm whose recurrent state is the projection r = proj_act(h ProjWeight) [T, P]
  (Weight [P, 4D], ProjWeight [D, P], H0 [N, P]); cell_clip / proj_clip > 0 clip c and r.
  As fluid 1.8's kernel does, a proj_activation other than identity applies cell_activation.
- gru: Input [T, 3D] (update u, reset r, candidate c~); Weight [D, 3D] read as its memory is:
  [D, 2D] update/reset then [D, D] candidate (as gru_unit); Bias [1, 3D] optional.
      u, r = act_gate(x_ur + h_prev W_ur)    c = act(x_c + (r * h_prev) W_c)
      h = u * c + (1 - u) * h_prev   (origin_mode: u * h_prev + (1 - u) * c)

Hidden / Cell / Projection keep Input's LoD. The Batch* outputs hold fluid's intermediate
values (activated gates, act_cell(c), r * h_prev, h) in Input's row order, not in fluid's
length-sorted batch order. The gradients are the exact derivatives, Cell@GRAD included (fluid
1.8's lstm / lstmp gradients ignore a gradient flowing into Cell).
"""
from __future__ import annotations

from .registry import define_op

# names fluid's GetActivationType accepts; "linear" and "" are identity
RNN_ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity", "linear", "")


def _known(d) -> bool:
    return d >= 0


def _check_act(ctx, name: str):
    act = ctx.attr(name)
    ctx.check(act in RNN_ACTIVATIONS,
              f"attribute {name}='{act}' is not an activation fluid's recurrent ops know; "
              f"use one of {list(RNN_ACTIVATIONS[:4])}")


def _check_float(ctx, slot: str, ref):
    v = ctx.input(slot)
    ctx.check(v.dtype in ("float32", "float64"),
              f"{slot} ({v.name}) must be float32 or float64, got {v.dtype}")
    ctx.check(v.dtype == ref.dtype,
              f"{slot} ({v.name}) has dtype {v.dtype} but Input has {ref.dtype}; cast one of "
              f"them so both match")
    return v


def _check_shape(ctx, slot: str, want: tuple, hint: str):
    v = ctx.input(slot)
    got = tuple(v.shape)
    ok = len(got) == len(want) and all(
        not (_known(g) and _known(w)) or g == w for g, w in zip(got, want))
    ctx.check(ok, f"{slot} ({v.name}) must have shape {list(want)} ({hint}), got {list(got)}")


def _check_input(ctx, gates: int):
    x = ctx.input("Input")
    _check_float(ctx, "Input", x)
    ctx.check(len(x.shape) == 2,
              f"Input ({x.name}) must be 2-D [total rows, {gates} * hidden] with LoD, got "
              f"shape {list(x.shape)}")
    ctx.check(not _known(x.shape[1]) or x.shape[1] % gates == 0,
              f"Input ({x.name}) has {x.shape[1]} columns, not a multiple of {gates}: it holds "
              f"the {gates} projected gate blocks of each step (fc(size={gates} * hidden))")
    return x


def _lstm_common(ctx, recurrent: int):
    """Checks shared by lstm and lstmp; returns (Input, D)."""
    x = _check_input(ctx, 4)
    for name in ("gate_activation", "cell_activation", "candidate_activation"):
        _check_act(ctx, name)
    d = x.shape[1] // 4 if _known(x.shape[1]) else ctx.input("Weight").shape[1] // 4
    _check_float(ctx, "Weight", x)
    _check_shape(ctx, "Weight", (recurrent, 4 * d), "[recurrent size, 4 * hidden]")
    _check_float(ctx, "Bias", x)
    width = 7 * d if ctx.attr("use_peepholes") else 4 * d
    _check_shape(ctx, "Bias", (1, width),
                 "[1, 7 * hidden] with use_peepholes, else [1, 4 * hidden]")
    for slot, size in (("H0", recurrent), ("C0", d)):
        if ctx.has_input(slot):
            _check_float(ctx, slot, x)
            _check_shape(ctx, slot, (-1, size), "[number of sequences, size]")
    return x, d


@define_op("lstm", inputs=["Input", "H0?", "C0?", "Weight", "Bias"],
           outputs=["Hidden", "Cell", "BatchGate", "BatchCellPreAct"],
           attrs={"use_peepholes": ("bool", True), "is_reverse": ("bool", False),
                  "gate_activation": ("str", "sigmoid"), "cell_activation": ("str", "tanh"),
                  "candidate_activation": ("str", "tanh")},
           nondiff_outputs=("BatchGate", "BatchCellPreAct"),
           grad_uses=("Input", "H0", "C0", "Weight", "Bias", "Hidden", "Cell", "BatchGate"),
           lod_inputs=("Input",),
           share_lod=(("Input", "Hidden"), ("Input", "Cell"), ("Input", "BatchGate"),
                      ("Input", "BatchCellPreAct")))
def _lstm(ctx):
    x = ctx.input("Input")
    d = ctx.input("Weight").shape[0]
    x, d = _lstm_common(ctx, d)
    t = x.shape[0]
    for slot in ("Hidden", "Cell", "BatchCellPreAct"):
        ctx.set_output(slot, (t, d), x.dtype)
    ctx.set_output("BatchGate", (t, 4 * d), x.dtype)


@define_op("lstmp", inputs=["Input", "H0?", "C0?", "Weight", "ProjWeight", "Bias"],
           outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"],
           attrs={"use_peepholes": ("bool", True), "is_reverse": ("bool", False),
                  "cell_clip": ("float", 0.0), "proj_clip": ("float", 0.0),
                  "gate_activation": ("str", "sigmoid"), "cell_activation": ("str", "tanh"),
                  "candidate_activation": ("str", "tanh"), "proj_activation": ("str", "tanh")},
           nondiff_outputs=("BatchGate", "BatchCellPreAct", "BatchHidden"),
           grad_uses=("Input", "H0", "C0", "Weight", "ProjWeight", "Bias", "Projection",
                      "Cell", "BatchGate", "BatchHidden"),
           lod_inputs=("Input",),
           share_lod=(("Input", "Projection"), ("Input", "Cell"), ("Input", "BatchGate"),
                      ("Input", "BatchCellPreAct"), ("Input", "BatchHidden")))
def _lstmp(ctx):
    pw = ctx.input("ProjWeight")
    p = pw.shape[1]
    x, d = _lstm_common(ctx, p)
    _check_act(ctx, "proj_activation")
    _check_float(ctx, "ProjWeight", x)
    _check_shape(ctx, "ProjWeight", (d, p), "[hidden, projection size]")
    for name in ("cell_clip", "proj_clip"):
        ctx.check(ctx.attr(name) >= 0.0, f"attribute {name} must not be negative, got "
                                         f"{ctx.attr(name)} (0 means no clipping)")
    t = x.shape[0]
    ctx.set_output("Projection", (t, p), x.dtype)
    for slot in ("Cell", "BatchCellPreAct", "BatchHidden"):
        ctx.set_output(slot, (t, d), x.dtype)
    ctx.set_output("BatchGate", (t, 4 * d), x.dtype)


