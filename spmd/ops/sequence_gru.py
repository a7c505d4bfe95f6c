"""Op definitions: gru, the GRU over the sequences of a LoD tensor (fluid.layers.dynamic_gru);
the formulas are in spmd/ops/sequence_rnn.py's docstring, its kernel in
spmd/kernels/sequence_gru.py.
"""
from __future__ import annotations

from .registry import define_op
from .sequence_rnn import _check_act, _check_float, _check_input, _check_shape, _known


@define_op("gru", inputs=["Input", "H0?", "Weight", "Bias?"],
           outputs=["BatchGate", "BatchResetHiddenPrev", "BatchHidden", "Hidden"],
           attrs={"activation": ("str", "tanh"), "gate_activation": ("str", "sigmoid"),
                  "is_reverse": ("bool", False), "origin_mode": ("bool", False)},
           nondiff_outputs=("BatchGate", "BatchResetHiddenPrev", "BatchHidden"),
           grad_uses=("Input", "H0", "Weight", "Bias", "BatchGate", "BatchResetHiddenPrev",
                      "Hidden"),
           lod_inputs=("Input",),
           share_lod=(("Input", "Hidden"), ("Input", "BatchGate"),
                      ("Input", "BatchResetHiddenPrev"), ("Input", "BatchHidden")))
def _gru(ctx):
    x = _check_input(ctx, 3)
    for name in ("activation", "gate_activation"):
        _check_act(ctx, name)
    w = _check_float(ctx, "Weight", x)
    d = w.shape[0] if _known(w.shape[0]) else x.shape[1] // 3
    _check_shape(ctx, "Weight", (d, 3 * d), "[hidden, 3 * hidden]")
    ctx.check(not (_known(x.shape[1]) and _known(d)) or x.shape[1] == 3 * d,
              f"Input ({x.name}) has {x.shape[1]} columns but Weight {list(w.shape)} needs "
              f"3 * hidden = {3 * d}; project the input with fc(size=3 * hidden)")
    if ctx.has_input("Bias"):
        _check_float(ctx, "Bias", x)
        _check_shape(ctx, "Bias", (1, 3 * d), "[1, 3 * hidden]")
    if ctx.has_input("H0"):
        _check_float(ctx, "H0", x)
        _check_shape(ctx, "H0", (-1, d), "[number of sequences, hidden]")
    t = x.shape[0]
    ctx.set_output("BatchGate", (t, 3 * d), x.dtype)
    for slot in ("BatchResetHiddenPrev", "BatchHidden", "Hidden"):
        ctx.set_output(slot, (t, d), x.dtype)
