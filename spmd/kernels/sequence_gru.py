"""Kernels: gru over the sequences of a LoD tensor (the op is described in
spmd/ops/sequence_gru.py), stepped as lstm is (spmd/kernels/sequence_rnn.py's Steps).

Weight's memory is read as fluid's kernel reads it: the first 2*D*D values are the [D, 2D]
update/reset weight, the last D*D the [D, D] candidate weight.
"""
from __future__ import annotations

from .registry import kernel
from .sequence_rnn import act, act_grad, steps_of


def _weights(w, d: int):
    flat = w.reshape(-1)
    return flat[: 2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


@kernel("gru")
def gru(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Weight"]
    d = w.shape[0]
    steps = steps_of(xp, ins, "gru", attrs["is_reverse"], x.shape[0], ("H0",))
    w_ur, w_c = _weights(w, d)
    gate_act, cand_act = attrs["gate_activation"], attrs["activation"]
    pre = x if ins.get("Bias") is None else x + ins["Bias"].reshape(1, 3 * d)
    gate = xp.empty_like(x)
    reset_h = xp.empty((x.shape[0], d), dtype=x.dtype)
    hidden = xp.empty_like(reset_h)
    h_prev = steps.initial(xp, ins.get("H0"), d, x.dtype)
    for rows in steps.rows:
        n = rows.shape[0]
        hp = h_prev[:n]
        g = pre[rows]
        ur = act(xp, gate_act, g[:, : 2 * d] + hp @ w_ur)
        u, r = ur[:, :d], ur[:, d:]
        rh = r * hp
        c = act(xp, cand_act, g[:, 2 * d:] + rh @ w_c)
        h = u * hp + (1.0 - u) * c if attrs["origin_mode"] else u * c + (1.0 - u) * hp
        gate[rows] = xp.concatenate([ur, c], axis=1)
        reset_h[rows], hidden[rows] = rh, h
        h_prev[:n] = h
    return {"Hidden": hidden, "BatchGate": gate, "BatchResetHiddenPrev": reset_h,
            "BatchHidden": hidden.copy()}


@kernel("gru_grad")
def gru_grad(xp, ins, attrs, want):
    x, w = ins["Input"], ins["Weight"]
    gate, reset_h, hidden = ins["BatchGate"], ins["BatchResetHiddenPrev"], ins["Hidden"]
    d = w.shape[0]
    steps = steps_of(xp, ins, "gru_grad", attrs["is_reverse"], x.shape[0])
    w_ur, w_c = _weights(w, d)
    gate_act, cand_act = attrs["gate_activation"], attrs["activation"]
    d_hidden = ins.get("Hidden@GRAD")
    if d_hidden is None:
        d_hidden = xp.zeros_like(hidden)
    h0 = steps.initial(xp, ins.get("H0"), d, x.dtype)
    dx = xp.zeros_like(x)
    dw_ur, dw_c = xp.zeros_like(w_ur), xp.zeros_like(w_c)
    dh_next = xp.zeros_like(h0)
    for t in range(len(steps.rows) - 1, -1, -1):
        rows = steps.rows[t]
        n = rows.shape[0]
        hp = hidden[steps.rows[t - 1][:n]] if t > 0 else h0[:n]
        g = gate[rows]
        u, r, c = g[:, :d], g[:, d: 2 * d], g[:, 2 * d:]
        dh = d_hidden[rows] + dh_next[:n]
        if attrs["origin_mode"]:
            du, dc, dhp = dh * (hp - c), dh * (1.0 - u), dh * u
        else:
            du, dc, dhp = dh * (c - hp), dh * u, dh * (1.0 - u)
        dc = act_grad(cand_act, c, dc)
        d_rh = dc @ w_c.T
        dur = xp.concatenate([act_grad(gate_act, u, du), act_grad(gate_act, r, d_rh * hp)],
                             axis=1)
        dx[rows] = xp.concatenate([dur, dc], axis=1)
        dw_ur += hp.T @ dur
        dw_c += reset_h[rows].T @ dc
        dh_next[:n] = dhp + d_rh * r + dur @ w_ur.T
    out = {"Input@GRAD": dx,
           "Weight@GRAD": xp.concatenate([dw_ur.reshape(-1), dw_c.reshape(-1)]).reshape(w.shape)}
    if ins.get("Bias") is not None:
        out["Bias@GRAD"] = dx.sum(axis=0).reshape(ins["Bias"].shape)
    if ins.get("H0") is not None:
        out["H0@GRAD"] = steps.unsort(xp, dh_next)
    return {k: v for k, v in out.items() if k in want}
