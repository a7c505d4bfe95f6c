"""Kernels: lstm and lstmp over the sequences of a LoD tensor (the ops are described in
spmd/ops/sequence_rnn.py); gru is in spmd/kernels/sequence_gru.py.

The sequences run together, as fluid runs them: sorted by length (longest first), step t
computes the first n_t of them at once, n_t being how many are longer than t. Gradients are the
exact derivatives of the forward pass, walked back over the same steps.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel
from .sequence import input_lod


class Steps:
    """The time steps of a LoD batch: `order` sorts the sequences longest first; `rows[t]` are
    the input rows the first n_t sorted sequences read at step t (from their end when
    reversed)."""

    def __init__(self, xp, offsets: np.ndarray, reverse: bool):
        lengths = np.diff(offsets)
        self.order = np.argsort(-lengths, kind="stable")
        self.num_seqs = lengths.size
        sorted_len = lengths[self.order]
        starts, ends = offsets[:-1][self.order], offsets[1:][self.order]
        self.rows = []
        for t in range(int(sorted_len.max()) if sorted_len.size else 0):
            n = int(np.sum(sorted_len > t))
            self.rows.append(xp.asarray(ends[:n] - 1 - t if reverse else starts[:n] + t))
        self.xp_order = xp.asarray(self.order)

    def initial(self, xp, state, width: int, dtype):
        """The initial state ([num sequences, width], in sequence order) in sorted order, or
        zeros without one."""
        if state is None:
            return xp.zeros((self.num_seqs, width), dtype=dtype)
        return state[self.xp_order]

    def unsort(self, xp, sorted_rows):
        out = xp.empty_like(sorted_rows)
        out[self.xp_order] = sorted_rows
        return out


def steps_of(xp, ins, op: str, reverse: bool, rows: int, states=()) -> Steps:
    """The Steps of `ins["Input"]`'s last LoD level, after checking it covers the rows and the
    initial states have one row per sequence."""
    offsets = input_lod(ins, "Input", op)[-1]
    if int(offsets[-1]) != rows:
        raise InvalidArgumentError(
            f"{op}: Input has {rows} rows but its LoD {offsets.tolist()} covers "
            f"{int(offsets[-1])}; feed a LoD whose last offset is the number of rows")
    n = offsets.size - 1
    for slot in states:
        s = ins.get(slot)
        if s is not None and s.shape[0] != n:
            raise InvalidArgumentError(
                f"{op}: {slot} has {s.shape[0]} rows but Input holds {n} sequences (LoD "
                f"{offsets.tolist()}); give one initial state row per sequence")
    return Steps(xp, offsets, reverse)


def act(xp, name: str, x):
    """fluid's recurrent activations by name ("linear" and "" are identity)."""
    if name == "sigmoid":
        return 0.5 * (xp.tanh(0.5 * x) + 1.0)  # no exp overflow for large negative x
    if name == "tanh":
        return xp.tanh(x)
    if name == "relu":
        return xp.maximum(x, 0.0).astype(x.dtype, copy=False)
    return x


def act_grad(name: str, y, dy):
    """dy times the activation's derivative, written with its output y (as fluid does)."""
    if name == "sigmoid":
        return dy * y * (1.0 - y)
    if name == "tanh":
        return dy * (1.0 - y * y)
    if name == "relu":
        return dy * (y > 0)
    return dy


def _clip_mask(y, bound: float):
    """Where a value clipped to [-bound, bound] passes its gradient (fluid's _ClipGradFunctor)."""
    return (y > -bound) & (y < bound)


def _peepholes(bias, d: int, attrs):
    if not attrs["use_peepholes"]:
        return None
    flat = bias.reshape(-1)
    return flat[4 * d: 5 * d], flat[5 * d: 6 * d], flat[6 * d: 7 * d]


def _lstm_forward(xp, ins, attrs, proj: bool):
    x, w, bias = ins["Input"], ins["Weight"], ins["Bias"]
    op = "lstmp" if proj else "lstm"
    d = x.shape[1] // 4
    steps = steps_of(xp, ins, op, attrs["is_reverse"], x.shape[0], ("H0", "C0"))
    peep = _peepholes(bias, d, attrs)
    pw = ins["ProjWeight"] if proj else None
    cell_clip = attrs.get("cell_clip", 0.0)
    proj_clip = attrs.get("proj_clip", 0.0)
    gate_act, cell_act = attrs["gate_activation"], attrs["cell_activation"]
    cand_act = attrs["candidate_activation"]
    pre = x + bias.reshape(-1)[: 4 * d]
    gate = xp.empty_like(x)
    cell = xp.empty((x.shape[0], d), dtype=x.dtype)
    cell_out, hidden = xp.empty_like(cell), xp.empty_like(cell)
    projection = xp.empty((x.shape[0], pw.shape[1]), dtype=x.dtype) if proj else None
    rec = steps.initial(xp, ins.get("H0"), w.shape[0], x.dtype)
    c_prev = steps.initial(xp, ins.get("C0"), d, x.dtype)
    for rows in steps.rows:
        n = rows.shape[0]
        g = pre[rows] + rec[:n] @ w
        cp = c_prev[:n]
        gi, gf, go = g[:, d: 2 * d], g[:, 2 * d: 3 * d], g[:, 3 * d:]
        if peep is not None:
            gi, gf = gi + cp * peep[0], gf + cp * peep[1]
        cand = act(xp, cand_act, g[:, :d])
        i, f = act(xp, gate_act, gi), act(xp, gate_act, gf)
        c = cand * i + cp * f
        if cell_clip > 0.0:
            c = xp.clip(c, -cell_clip, cell_clip)
        if peep is not None:
            go = go + c * peep[2]
        o = act(xp, gate_act, go)
        ac = act(xp, cell_act, c)
        h = o * ac
        gate[rows] = xp.concatenate([cand, i, f, o], axis=1)
        cell[rows], cell_out[rows], hidden[rows] = c, ac, h
        if proj:
            r = h @ pw
            if attrs["proj_activation"] not in ("identity", "linear", ""):
                r = act(xp, cell_act, r)  # fluid 1.8 applies cell_activation here
            if proj_clip > 0.0:
                r = xp.clip(r, -proj_clip, proj_clip)
            projection[rows] = r
            rec[:n] = r
        else:
            rec[:n] = h
        c_prev[:n] = c
    return gate, cell, cell_out, hidden, projection


@kernel("lstm")
def lstm(xp, ins, attrs, want):
    gate, cell, cell_act, hidden, _ = _lstm_forward(xp, ins, attrs, proj=False)
    return {"Hidden": hidden, "Cell": cell, "BatchGate": gate, "BatchCellPreAct": cell_act}


@kernel("lstmp")
def lstmp(xp, ins, attrs, want):
    gate, cell, cell_act, hidden, projection = _lstm_forward(xp, ins, attrs, proj=True)
    return {"Projection": projection, "Cell": cell, "BatchGate": gate,
            "BatchCellPreAct": cell_act, "BatchHidden": hidden}


def _grad_or_zeros(xp, ins, slot: str, like):
    g = ins.get(slot)
    return xp.zeros_like(like) if g is None else g


def _lstm_backward(xp, ins, attrs, want, proj: bool):
    x, w, bias = ins["Input"], ins["Weight"], ins["Bias"]
    gate, cell = ins["BatchGate"], ins["Cell"]
    op = "lstmp_grad" if proj else "lstm_grad"
    d = x.shape[1] // 4
    steps = steps_of(xp, ins, op, attrs["is_reverse"], x.shape[0])
    peep = _peepholes(bias, d, attrs)
    gate_act, cell_act = attrs["gate_activation"], attrs["cell_activation"]
    cand_act = attrs["candidate_activation"]
    out_slot = "Projection" if proj else "Hidden"
    recurrent = ins[out_slot]
    d_out = _grad_or_zeros(xp, ins, out_slot + "@GRAD", recurrent)
    d_cell = ins.get("Cell@GRAD")
    if proj:
        pw, hidden = ins["ProjWeight"], ins["BatchHidden"]
        dpw = xp.zeros_like(pw)
        proj_clip = attrs["proj_clip"]
        proj_acts = attrs["proj_activation"] not in ("identity", "linear", "")
    cell_clip = attrs.get("cell_clip", 0.0)
    rec0 = steps.initial(xp, ins.get("H0"), w.shape[0], x.dtype)
    c0 = steps.initial(xp, ins.get("C0"), d, x.dtype)
    dx = xp.zeros_like(x)
    dw = xp.zeros_like(w)
    dpeep = xp.zeros((3, d), dtype=x.dtype)
    d_rec = xp.zeros_like(rec0)  # from the next step, in sorted order
    dc_next = xp.zeros_like(c0)
    for t in range(len(steps.rows) - 1, -1, -1):
        rows = steps.rows[t]
        n = rows.shape[0]
        if t > 0:
            prev = steps.rows[t - 1][:n]
            rec_prev, cp = recurrent[prev], cell[prev]
        else:
            rec_prev, cp = rec0[:n], c0[:n]
        dr = d_out[rows] + d_rec[:n]
        if proj:
            r = recurrent[rows]
            if proj_clip > 0.0:
                dr = dr * _clip_mask(r, proj_clip)
            if proj_acts:
                dr = act_grad(cell_act, r, dr)
            dpw += hidden[rows].T @ dr
            dh = dr @ pw.T
        else:
            dh = dr
        c, g = cell[rows], gate[rows]
        cand, i, f, o = g[:, :d], g[:, d: 2 * d], g[:, 2 * d: 3 * d], g[:, 3 * d:]
        ac = act(xp, cell_act, c)
        dgo = act_grad(gate_act, o, dh * ac)
        dc = dc_next[:n] + act_grad(cell_act, ac, dh * o)
        if d_cell is not None:
            dc = dc + d_cell[rows]
        if peep is not None:
            dc = dc + dgo * peep[2]
        if cell_clip > 0.0:
            dc = dc * _clip_mask(c, cell_clip)
        dcand = act_grad(cand_act, cand, dc * i)
        di, df = act_grad(gate_act, i, dc * cand), act_grad(gate_act, f, dc * cp)
        dg = xp.concatenate([dcand, di, df, dgo], axis=1)
        dx[rows] = dg
        dw += rec_prev.T @ dg
        d_rec[:n] = dg @ w.T
        dc_prev = dc * f
        if peep is not None:
            dc_prev = dc_prev + di * peep[0] + df * peep[1]
            dpeep += xp.stack([(di * cp).sum(0), (df * cp).sum(0), (dgo * c).sum(0)])
        dc_next[:n] = dc_prev
    out = {"Input@GRAD": dx, "Weight@GRAD": dw}
    db = [dx.sum(axis=0)] + ([dpeep.reshape(-1)] if peep is not None else [])
    out["Bias@GRAD"] = xp.concatenate(db).reshape(bias.shape)
    if ins.get("H0") is not None:
        out["H0@GRAD"] = steps.unsort(xp, d_rec)
    if ins.get("C0") is not None:
        out["C0@GRAD"] = steps.unsort(xp, dc_next)
    if proj:
        out["ProjWeight@GRAD"] = dpw
    return {k: v for k, v in out.items() if k in want}


@kernel("lstm_grad")
def lstm_grad(xp, ins, attrs, want):
    return _lstm_backward(xp, ins, attrs, want, proj=False)


@kernel("lstmp_grad")
def lstmp_grad(xp, ins, attrs, want):
    return _lstm_backward(xp, ins, attrs, want, proj=True)
