"""Kernels: gru_unit, lstm_unit and cudnn_lstm (the ops are described in spmd/ops/rnn.py).

Written against `xp`; results keep the input dtype (Python float constants only). The gates
are computed as fluid computes them: sigmoid and tanh elementwise, the recurrent products as
matrix products. Gradients are the exact derivatives of the forward pass, including the
gradients that flow into gru_unit's Gate and ResetHiddenPrev outputs when a loss reads them.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ops.rnn import GRU_ACTIVATIONS, cudnn_lstm_weight_size, dropout_active
from .registry import kernel


def _sigmoid(xp, x):
    # 0.5 * (1 + tanh(x / 2)) is sigmoid without exp overflow for large negative x
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)


def _act(xp, code: int, x):
    name = GRU_ACTIVATIONS[code]
    if name == "sigmoid":
        return _sigmoid(xp, x)
    if name == "tanh":
        return xp.tanh(x)
    if name == "relu":
        return xp.maximum(x, 0.0).astype(x.dtype, copy=False)
    return x.copy()


def _act_grad(code: int, y, dy):
    """d act / d pre-activation times dy, from the activation's output y (as fluid does)."""
    name = GRU_ACTIVATIONS[code]
    if name == "sigmoid":
        return dy * y * (1.0 - y)
    if name == "tanh":
        return dy * (1.0 - y * y)
    if name == "relu":
        return dy * (y > 0)
    return dy


def _grad_or_zeros(xp, ins, slot, like):
    g = ins.get(slot)
    return xp.zeros_like(like) if g is None else g


# -- gru_unit ----------------------------------------------------------------------------------

def _gru_weights(w, d: int):
    """Weight's memory read as fluid's kernel reads it: [D, 2D] update/reset, then [D, D]."""
    flat = w.reshape(-1)
    return flat[: 2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


@kernel("gru_unit")
def gru_unit(xp, ins, attrs, want):
    x, h_prev = ins["Input"], ins["HiddenPrev"]
    d = h_prev.shape[1]
    if x.shape != (h_prev.shape[0], 3 * d):
        raise InvalidArgumentError(
            f"gru_unit: Input has shape {list(x.shape)} but HiddenPrev {list(h_prev.shape)} "
            f"needs [{h_prev.shape[0]}, {3 * d}] (batch, 3 * hidden); feed matching batches")
    w_ur, w_c = _gru_weights(ins["Weight"], d)
    gate = x.copy()
    if ins.get("Bias") is not None:
        gate += ins["Bias"].reshape(1, 3 * d)
    gate[:, : 2 * d] += h_prev @ w_ur
    gate[:, : 2 * d] = _act(xp, attrs["gate_activation"], gate[:, : 2 * d])
    u, r = gate[:, :d], gate[:, d: 2 * d]
    reset_h = r * h_prev
    gate[:, 2 * d:] += reset_h @ w_c
    gate[:, 2 * d:] = _act(xp, attrs["activation"], gate[:, 2 * d:])
    c = gate[:, 2 * d:]
    if attrs["origin_mode"]:
        hidden = u * h_prev + (1.0 - u) * c
    else:
        hidden = u * c + (1.0 - u) * h_prev
    return {"Gate": gate, "ResetHiddenPrev": reset_h, "Hidden": hidden}


@kernel("gru_unit_grad")
def gru_unit_grad(xp, ins, attrs, want):
    h_prev, gate, reset_h = ins["HiddenPrev"], ins["Gate"], ins["ResetHiddenPrev"]
    d = h_prev.shape[1]
    w_ur, w_c = _gru_weights(ins["Weight"], d)
    u, r, c = gate[:, :d], gate[:, d: 2 * d], gate[:, 2 * d:]
    dh = _grad_or_zeros(xp, ins, "Hidden@GRAD", h_prev)
    dgate_out = _grad_or_zeros(xp, ins, "Gate@GRAD", gate)  # w.r.t. the activated gates
    d_reset_h = _grad_or_zeros(xp, ins, "ResetHiddenPrev@GRAD", reset_h)
    if attrs["origin_mode"]:
        du, dc, dh_prev = dh * (h_prev - c), dh * (1.0 - u), dh * u
    else:
        du, dc, dh_prev = dh * (c - h_prev), dh * u, dh * (1.0 - u)
    dgate = xp.empty_like(gate)  # w.r.t. the pre-activation gates
    dgate[:, 2 * d:] = _act_grad(attrs["activation"], c, dc + dgate_out[:, 2 * d:])
    d_reset_h = d_reset_h + dgate[:, 2 * d:] @ w_c.T
    dr = d_reset_h * h_prev + dgate_out[:, d: 2 * d]
    gate_code = attrs["gate_activation"]
    dgate[:, :d] = _act_grad(gate_code, u, du + dgate_out[:, :d])
    dgate[:, d: 2 * d] = _act_grad(gate_code, r, dr)
    out = {}
    if "HiddenPrev@GRAD" in want:
        out["HiddenPrev@GRAD"] = dh_prev + d_reset_h * r + dgate[:, : 2 * d] @ w_ur.T
    if "Weight@GRAD" in want:
        dw = xp.concatenate([(h_prev.T @ dgate[:, : 2 * d]).reshape(-1),
                             (reset_h.T @ dgate[:, 2 * d:]).reshape(-1)])
        out["Weight@GRAD"] = dw.reshape(ins["Weight"].shape)
    if "Input@GRAD" in want:
        out["Input@GRAD"] = dgate
    if "Bias@GRAD" in want and ins.get("Bias") is not None:
        out["Bias@GRAD"] = dgate.sum(axis=0).reshape(ins["Bias"].shape)
    return out


# -- lstm_unit ---------------------------------------------------------------------------------

def _lstm_unit_gates(xp, x, d: int, forget_bias: float):
    i = _sigmoid(xp, x[:, :d])
    f = _sigmoid(xp, x[:, d: 2 * d] + forget_bias)
    o = _sigmoid(xp, x[:, 2 * d: 3 * d])
    g = xp.tanh(x[:, 3 * d:])
    return i, f, o, g


def _check_lstm_unit(x, c_prev):
    if x.shape != (c_prev.shape[0], 4 * c_prev.shape[1]):
        raise InvalidArgumentError(
            f"lstm_unit: X has shape {list(x.shape)} but C_prev {list(c_prev.shape)} needs "
            f"[{c_prev.shape[0]}, {4 * c_prev.shape[1]}] (batch, 4 * hidden); feed matching "
            f"batches")


@kernel("lstm_unit")
def lstm_unit(xp, ins, attrs, want):
    x, c_prev = ins["X"], ins["C_prev"]
    _check_lstm_unit(x, c_prev)
    i, f, o, g = _lstm_unit_gates(xp, x, c_prev.shape[1], attrs["forget_bias"])
    c = f * c_prev + i * g
    return {"C": c, "H": o * xp.tanh(c)}


@kernel("lstm_unit_grad")
def lstm_unit_grad(xp, ins, attrs, want):
    x, c_prev, c = ins["X"], ins["C_prev"], ins["C"]
    i, f, o, g = _lstm_unit_gates(xp, x, c_prev.shape[1], attrs["forget_bias"])
    dh = _grad_or_zeros(xp, ins, "H@GRAD", c)
    dc = _grad_or_zeros(xp, ins, "C@GRAD", c)
    tanh_c = xp.tanh(c)
    dc = dc + dh * o * (1.0 - tanh_c * tanh_c)
    out = {}
    if "X@GRAD" in want:
        out["X@GRAD"] = xp.concatenate([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f),
                                        dh * tanh_c * o * (1.0 - o), dc * i * (1.0 - g * g)],
                                       axis=1)
    if "C_prev@GRAD" in want:
        out["C_prev@GRAD"] = dc * f
    return out



# -- cudnn_lstm --------------------------------------------------------------------------------

def _lstm_layout(attrs):
    """cuDNN's flat weight, as slices per (layer, direction) in layer-major order: every
    layer's and direction's input weight [4H, in] and recurrent weight [4H, H] first, then
    every input bias [4H] and recurrent bias [4H] in the same order. Gates in each: i, f, c, o.
    Returns [(w_ih, w_hh, b_ih, b_hh)] with each entry (offset, shape)."""
    hidden, layers = attrs["hidden_size"], attrs["num_layers"]
    dirs = 2 if attrs["is_bidirec"] else 1
    weights, offset = [], 0
    for layer in range(layers):
        width = attrs["input_size"] if layer == 0 else hidden * dirs
        for _ in range(dirs):
            w_ih = (offset, (4 * hidden, width))
            offset += 4 * hidden * width
            weights.append((w_ih, (offset, (4 * hidden, hidden))))
            offset += 4 * hidden * hidden
    layout = []
    for w_ih, w_hh in weights:
        layout.append((w_ih, w_hh, (offset, (4 * hidden,)), (offset + 4 * hidden, (4 * hidden,))))
        offset += 8 * hidden
    return layout


def _view(flat, entry):
    offset, shape = entry
    return flat[offset: offset + int(np.prod(shape))].reshape(shape)


def _check_cudnn_lstm(ins, attrs):
    x, h0, c0, w = ins["Input"], ins["InitH"], ins["InitC"], ins["W"]
    hidden, layers, dirs = attrs["hidden_size"], attrs["num_layers"], 1 + attrs["is_bidirec"]
    problems = []
    if x.ndim != 3 or x.shape[2] != attrs["input_size"]:
        problems.append(f"Input has shape {list(x.shape)}, expected [seq_len, batch, "
                        f"{attrs['input_size']}] (time-major, input_size)")
    elif x.shape[0] > attrs["max_len"]:
        problems.append(f"Input has {x.shape[0]} time steps, more than max_len="
                        f"{attrs['max_len']}; raise max_len or shorten the sequence")
    want = [layers * dirs, x.shape[1] if x.ndim == 3 else -1, hidden]
    for slot, v in (("InitH", h0), ("InitC", c0)):
        if list(v.shape) != want:
            problems.append(f"{slot} has shape {list(v.shape)}, expected {want} "
                            f"(num_layers * directions, batch, hidden_size)")
    size = cudnn_lstm_weight_size(attrs["input_size"], hidden, layers, attrs["is_bidirec"])
    if w.size != size:
        problems.append(f"W has {w.size} values, expected {size}")
    if problems:
        raise InvalidArgumentError("cudnn_lstm: " + "; ".join(problems))


def _run_direction(xp, x, h, c, w_ih, w_hh, bias, reverse: bool):
    """One direction of one layer: hidden states [T, N, H] and what the gradient needs."""
    hid = h.shape[1]
    pre = x @ w_ih.T + bias
    gates = xp.empty_like(pre)
    cells = xp.empty(x.shape[:2] + (hid,), dtype=x.dtype)
    hs = xp.empty_like(cells)
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        z = pre[t] + h @ w_hh.T
        gates[t, :, : 2 * hid] = _sigmoid(xp, z[:, : 2 * hid])
        gates[t, :, 2 * hid: 3 * hid] = xp.tanh(z[:, 2 * hid: 3 * hid])
        gates[t, :, 3 * hid:] = _sigmoid(xp, z[:, 3 * hid:])
        i, f, g, o = (gates[t, :, k * hid: (k + 1) * hid] for k in range(4))
        c = f * c + i * g
        h = o * xp.tanh(c)
        cells[t], hs[t] = c, h
    return hs, h, c, gates, cells


def _back_direction(xp, x, h0, c0, w_ih, w_hh, fwd, d_hs, dh, dc, reverse: bool):
    """Gradients of one direction: (dx, dh0, dc0, dw_ih, dw_hh, db)."""
    hs, gates, cells = fwd
    steps, hid = x.shape[0], h0.shape[1]
    dz = xp.empty_like(gates)
    # the state each step started from, in the direction's own order
    h_prev, c_prev = xp.empty_like(hs), xp.empty_like(cells)
    if reverse:
        h_prev[-1], c_prev[-1] = h0, c0
        h_prev[:-1], c_prev[:-1] = hs[1:], cells[1:]
    else:
        h_prev[0], c_prev[0] = h0, c0
        h_prev[1:], c_prev[1:] = hs[:-1], cells[:-1]
    for t in (range(steps) if reverse else range(steps - 1, -1, -1)):
        i, f, g, o = (gates[t, :, k * hid: (k + 1) * hid] for k in range(4))
        dh = dh + d_hs[t]
        tanh_c = xp.tanh(cells[t])
        dc = dc + dh * o * (1.0 - tanh_c * tanh_c)
        dz[t, :, :hid] = dc * g * i * (1.0 - i)
        dz[t, :, hid: 2 * hid] = dc * c_prev[t] * f * (1.0 - f)
        dz[t, :, 2 * hid: 3 * hid] = dc * i * (1.0 - g * g)
        dz[t, :, 3 * hid:] = dh * tanh_c * o * (1.0 - o)
        dh = dz[t] @ w_hh
        dc = dc * f
    flat_dz = dz.reshape(-1, 4 * hid)
    return (dz @ w_ih, dh, dc, flat_dz.T @ x.reshape(-1, x.shape[2]),
            flat_dz.T @ h_prev.reshape(-1, hid), flat_dz.sum(axis=0))


def _lstm_forward(xp, ins, attrs, masks):
    """All layers; returns Out, last_h, last_c and per layer (its input, per-direction state)."""
    x, h0, c0, w = ins["Input"], ins["InitH"], ins["InitC"], ins["W"].reshape(-1)
    layout, dirs = _lstm_layout(attrs), 1 + attrs["is_bidirec"]
    last_h, last_c = xp.empty_like(h0), xp.empty_like(c0)
    layer_in, caches = x, []
    for layer in range(attrs["num_layers"]):
        if layer > 0 and masks is not None:
            layer_in = layer_in * masks[layer - 1]
        outs, states = [], []
        for k in range(layer * dirs, (layer + 1) * dirs):
            w_ih, w_hh, b_ih, b_hh = (_view(w, e) for e in layout[k])
            hs, last_h[k], last_c[k], gates, cells = _run_direction(
                xp, layer_in, h0[k], c0[k], w_ih, w_hh, b_ih + b_hh, reverse=k % dirs == 1)
            outs.append(hs)
            states.append((hs, gates, cells))
        caches.append((layer_in, states))
        layer_in = outs[0] if dirs == 1 else xp.concatenate(outs, axis=2)
    return layer_in, last_h, last_c, caches


def _dropout_masks(xp, x, attrs, ctx):
    """Scaled keep masks (0 or 1 / (1 - p)) for the inputs of layers 1.. in training."""
    if attrs["seed"] >= 0:
        # a fixed seed starts a fixed sequence of masks (cuDNN seeds its dropout state once)
        rng = ctx.scratch.get("rng")
        if rng is None:
            rng = ctx.scratch["rng"] = np.random.default_rng(attrs["seed"])
    else:
        rng = ctx.rng
    p, dirs = attrs["dropout_prob"], 1 + attrs["is_bidirec"]
    shape = (attrs["num_layers"] - 1,) + x.shape[:2] + (attrs["hidden_size"] * dirs,)
    keep = rng.random(shape, dtype=np.float32) >= p
    return xp.asarray(keep.astype(x.dtype) * (1.0 / (1.0 - p))).astype(x.dtype, copy=False)


@kernel("cudnn_lstm", context=True)
def cudnn_lstm(xp, ins, attrs, want, ctx):
    _check_cudnn_lstm(ins, attrs)
    masks = _dropout_masks(xp, ins["Input"], attrs, ctx) if dropout_active(attrs) else None
    out, last_h, last_c, _ = _lstm_forward(xp, ins, attrs, masks)
    res = {"Out": out, "last_h": last_h, "last_c": last_c}
    if "Reserve" in want:
        res["Reserve"] = masks if masks is not None else xp.zeros((0,), dtype=out.dtype)
    return res


@kernel("cudnn_lstm_grad")
def cudnn_lstm_grad(xp, ins, attrs, want):
    masks = None
    if dropout_active(attrs):
        masks = ins.get("Reserve")
        if masks is None or masks.ndim != 4:
            raise InvalidArgumentError(
                f"cudnn_lstm_grad: with dropout_prob={attrs['dropout_prob']} in training the "
                f"gradient needs the dropout masks the forward op writes to its Reserve "
                f"output, which this op does not bind; bind Reserve (fluid.layers.lstm does), "
                f"or set is_test=True or dropout_prob=0")
    h0, c0, w = ins["InitH"], ins["InitC"], ins["W"].reshape(-1)
    out, _, _, caches = _lstm_forward(xp, ins, attrs, masks)
    d_out = _grad_or_zeros(xp, ins, "Out@GRAD", out)
    dlast_h = _grad_or_zeros(xp, ins, "last_h@GRAD", h0)
    dlast_c = _grad_or_zeros(xp, ins, "last_c@GRAD", c0)
    layout, dirs, hid = _lstm_layout(attrs), 1 + attrs["is_bidirec"], attrs["hidden_size"]
    dw = xp.zeros_like(w)
    dh0, dc0 = xp.empty_like(h0), xp.empty_like(c0)
    for layer in range(attrs["num_layers"] - 1, -1, -1):
        layer_in, states = caches[layer]
        d_in = xp.zeros_like(layer_in)
        for j, k in enumerate(range(layer * dirs, (layer + 1) * dirs)):
            w_ih, w_hh = _view(w, layout[k][0]), _view(w, layout[k][1])
            dx, dh0[k], dc0[k], dw_ih, dw_hh, db = _back_direction(
                xp, layer_in, h0[k], c0[k], w_ih, w_hh, states[j],
                d_out[:, :, j * hid: (j + 1) * hid], dlast_h[k], dlast_c[k], reverse=j == 1)
            d_in += dx
            for entry, g in zip(layout[k], (dw_ih, dw_hh, db, db)):
                _view(dw, entry)[...] = g
        d_out = d_in * masks[layer - 1] if layer > 0 and masks is not None else d_in
    res = {"Input@GRAD": d_out, "InitH@GRAD": dh0, "InitC@GRAD": dc0,
           "W@GRAD": dw.reshape(ins["W"].shape)}
    return {k: v for k, v in res.items() if k in want}
