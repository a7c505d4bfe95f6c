"""Op definitions: the recurrent units that need no LoD (fluid 1.8's gru_unit, lstm_unit and
cudnn_lstm, the op of fluid.layers.lstm).

- gru_unit: one GRU step on a projected input [N, 3D] (update, reset, candidate blocks) and the
  previous hidden state [N, D]; Weight [D, 3D] is read as fluid's kernel reads its memory: the
  first 2*D*D values are the [D, 2D] update/reset weight, the last D*D the [D, D] candidate
  weight. Activations are fluid's integer codes (GRU_ACTIVATIONS).
- lstm_unit: one LSTM step on the gate pre-activations X [N, 4D] (gate order i, f, o, g) and the
  previous cell [N, D].
- cudnn_lstm: a whole multi-layer (optionally bidirectional) LSTM over time-major input
  [T, N, I], with cuDNN's flat weight W (see cudnn_lstm_weight_size); runs on CPU here too.
"""
from __future__ import annotations

from .registry import define_op

# fluid's GRUActivationType codes: index = the code the op's attributes hold
GRU_ACTIVATIONS = ("identity", "sigmoid", "tanh", "relu")


def _known(d) -> bool:
    return d >= 0


def _check_float(ctx, var, slot: str):
    ctx.check(var.dtype in ("float32", "float64"),
              f"{slot} ({var.name}) must be float32 or float64, got {var.dtype}")


def _check_same_dtype(ctx, ref, var, slot: str, ref_slot: str):
    ctx.check(var.dtype == ref.dtype,
              f"{slot} ({var.name}) has dtype {var.dtype} but {ref_slot} has {ref.dtype}; "
              f"cast one of them so both match")


def _check_dim(ctx, got, want, what: str):
    ctx.check(not (_known(got) and _known(want)) or got == want,
              f"{what}: expected {want}, got {got}")


@define_op("gru_unit", inputs=["Input", "HiddenPrev", "Weight", "Bias?"],
           outputs=["Gate", "ResetHiddenPrev", "Hidden"],
           attrs={"activation": ("int", 2), "gate_activation": ("int", 1),
                  "origin_mode": ("bool", False)})
def _gru_unit(ctx):
    x, h, w = ctx.input("Input"), ctx.input("HiddenPrev"), ctx.input("Weight")
    for slot, v in (("Input", x), ("HiddenPrev", h), ("Weight", w)):
        _check_float(ctx, v, slot)
        ctx.check(len(v.shape) == 2, f"{slot} ({v.name}) must be 2-D, got shape {list(v.shape)}")
        _check_same_dtype(ctx, x, v, slot, "Input")
    for name in ("activation", "gate_activation"):
        code = ctx.attr(name)
        ctx.check(0 <= code < len(GRU_ACTIVATIONS),
                  f"attribute {name}={code} is not one of fluid's codes "
                  f"{dict(enumerate(GRU_ACTIVATIONS))}")
    d = h.shape[1]
    _check_dim(ctx, x.shape[1], 3 * d if _known(d) else -1,
               f"Input {list(x.shape)} must have 3 * hidden size columns (HiddenPrev is "
               f"{list(h.shape)}); project the step input with fc(size=3 * hidden) first")
    _check_dim(ctx, x.shape[0], h.shape[0],
               f"Input {list(x.shape)} and HiddenPrev {list(h.shape)} must have the same batch")
    ctx.check(not _known(d) or tuple(w.shape) in ((d, 3 * d), (-1, 3 * d), (d, -1)),
              f"Weight must have shape [{d}, {3 * d}] ([hidden, 3 * hidden]), "
              f"got {list(w.shape)}")
    if ctx.has_input("Bias"):
        b = ctx.input("Bias")
        _check_same_dtype(ctx, x, b, "Bias", "Input")
        ctx.check(not _known(d) or tuple(b.shape) in ((1, 3 * d), (3 * d,)),
                  f"Bias must have shape [1, {3 * d}] ([1, 3 * hidden]), got {list(b.shape)}")
    n = x.shape[0] if _known(x.shape[0]) else h.shape[0]
    ctx.set_output("Gate", (n, x.shape[1]), x.dtype)
    ctx.set_output("ResetHiddenPrev", (n, d), x.dtype)
    ctx.set_output("Hidden", (n, d), x.dtype)


@define_op("lstm_unit", inputs=["X", "C_prev"], outputs=["C", "H"],
           attrs={"forget_bias": ("float", 0.0)})
def _lstm_unit(ctx):
    x, c = ctx.input("X"), ctx.input("C_prev")
    _check_float(ctx, x, "X")
    _check_same_dtype(ctx, x, c, "C_prev", "X")
    ctx.check(len(x.shape) == 2 and len(c.shape) == 2,
              f"X and C_prev must be 2-D, got {list(x.shape)} and {list(c.shape)}")
    d = c.shape[1]
    _check_dim(ctx, x.shape[1], 4 * d if _known(d) else -1,
               f"X {list(x.shape)} must hold the 4 gates (i, f, o, g) of C_prev "
               f"{list(c.shape)}: 4 * hidden columns")
    _check_dim(ctx, x.shape[0], c.shape[0],
               f"X {list(x.shape)} and C_prev {list(c.shape)} must have the same batch")
    n = x.shape[0] if _known(x.shape[0]) else c.shape[0]
    ctx.set_output("C", (n, d), x.dtype)
    ctx.set_output("H", (n, d), x.dtype)


def cudnn_lstm_weight_size(input_size: int, hidden_size: int, num_layers: int,
                           is_bidirec: bool) -> int:
    """Length of cudnn_lstm's flat W (fluid.layers.lstm's parameter): per layer and direction
    an input weight [4H, in] and a recurrent weight [4H, H] (in = input_size for layer 0,
    H * directions above), and two biases [4H] each.

    >>> cudnn_lstm_weight_size(3, 4, 1, False)
    144
    """
    dirs = 2 if is_bidirec else 1
    total = 0
    for layer in range(num_layers):
        width = input_size if layer == 0 else hidden_size * dirs
        total += dirs * (4 * hidden_size * (width + hidden_size) + 8 * hidden_size)
    return total


def dropout_active(attrs) -> bool:
    """Whether cudnn_lstm drops out between layers (training, p > 0, more than one layer)."""
    return (not attrs["is_test"] and attrs["dropout_prob"] > 0.0
            and attrs["num_layers"] > 1)


@define_op("cudnn_lstm", inputs=["Input", "InitH", "InitC", "W", "Cache?"],
           outputs=["Out", "last_h", "last_c", "Reserve?"],
           no_grad_inputs=("Cache",), nondiff_outputs=("Reserve",),
           grad_uses=("Input", "InitH", "InitC", "W", "Reserve"), random=True,
           attrs={"max_len": ("int", 20), "dropout_prob": ("float", 0.0),
                  "is_bidirec": ("bool", False), "input_size": ("int", 10),
                  "hidden_size": ("int", 100), "num_layers": ("int", 1),
                  "is_test": ("bool", False), "seed": ("int", -1)})
def _cudnn_lstm(ctx):
    x, h0, c0, w = (ctx.input(s) for s in ("Input", "InitH", "InitC", "W"))
    for slot, v in (("Input", x), ("InitH", h0), ("InitC", c0), ("W", w)):
        _check_float(ctx, v, slot)
        _check_same_dtype(ctx, x, v, slot, "Input")
    hidden, layers = ctx.attr("hidden_size"), ctx.attr("num_layers")
    in_size, bidirec = ctx.attr("input_size"), ctx.attr("is_bidirec")
    p = ctx.attr("dropout_prob")
    ctx.check(hidden > 0 and layers > 0 and in_size > 0,
              f"hidden_size ({hidden}), num_layers ({layers}) and input_size ({in_size}) must "
              f"be positive")
    ctx.check(0.0 <= p < 1.0, f"dropout_prob must be in [0, 1), got {p}")
    ctx.check(len(x.shape) == 3,
              f"Input ({x.name}) must be 3-D time-major [seq_len, batch, input_size], got "
              f"{list(x.shape)}")
    _check_dim(ctx, x.shape[2], in_size, f"Input {list(x.shape)}: last dim vs input_size")
    max_len = ctx.attr("max_len")
    ctx.check(not _known(x.shape[0]) or x.shape[0] <= max_len,
              f"Input {list(x.shape)} has {x.shape[0]} time steps, more than max_len="
              f"{max_len}; raise max_len or shorten the sequence")
    dirs = 2 if bidirec else 1
    for slot, v in (("InitH", h0), ("InitC", c0)):
        ctx.check(len(v.shape) == 3,
                  f"{slot} ({v.name}) must be 3-D [num_layers * directions, batch, hidden], "
                  f"got {list(v.shape)}")
        _check_dim(ctx, v.shape[0], layers * dirs,
                   f"{slot} {list(v.shape)}: first dim must be num_layers * directions "
                   f"({layers} * {dirs})")
        _check_dim(ctx, v.shape[2], hidden, f"{slot} {list(v.shape)}: last dim vs hidden_size")
        _check_dim(ctx, v.shape[1], x.shape[1],
                   f"{slot} {list(v.shape)} and Input {list(x.shape)}: batch")
    size = cudnn_lstm_weight_size(in_size, hidden, layers, bidirec)
    ctx.check(len(w.shape) == 1 and (not _known(w.shape[0]) or w.shape[0] == size),
              f"W ({w.name}) must be the flat cuDNN weight of shape [{size}] for input_size="
              f"{in_size}, hidden_size={hidden}, num_layers={layers}, is_bidirec={bidirec}; "
              f"got {list(w.shape)}")
    ctx.set_output("Out", (x.shape[0], x.shape[1], hidden * dirs), x.dtype)
    ctx.set_output("last_h", (layers * dirs, x.shape[1], hidden), x.dtype)
    ctx.set_output("last_c", (layers * dirs, x.shape[1], hidden), x.dtype)
    if dropout_active(ctx.attrs):
        ctx.set_output("Reserve", (layers - 1, x.shape[0], x.shape[1], hidden * dirs), x.dtype)
    else:
        ctx.set_output("Reserve", (0,), x.dtype)
