"""Kernels: warpctc (and its gradient), ctc_align, edit_distance and sequence_erase (the ops
are described in spmd/ops/ctc.py).

CTC runs all sequences together over the padded [N, T, S] lattice of extended labels (blank,
l1, blank, l2, ..., blank), in log space: the forward (alpha) and backward (beta) recursions
give log p(label) and the posteriors of each class at each step, and d(-log p)/d logits =
softmax - posterior. Log-zero is a large negative number, so sums of impossible paths stay
finite. Token edits run on the host.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .crf import host
from .registry import kernel
from .sequence import input_lod

NEG = -1e30  # log of zero: exp(NEG - m) is 0 and never a nan


def _lse(xp, *terms):
    stacked = xp.stack(terms)
    m = stacked.max(axis=0)
    return m + xp.log(xp.exp(stacked - m).sum(axis=0))


def _shift(xp, a, k: int):
    """a moved k places along the last axis, NEG filling the front."""
    out = xp.full(a.shape, NEG, dtype=a.dtype)
    out[..., k:] = a[..., :-k]
    return out


def _ctc_layout(xp, ins):
    """(logits [N, T, C], logit lengths, labels [N, L] int64, label lengths) of either form."""
    x, label = ins["Logits"], ins["Label"]
    if ins.get("LogitsLength") is None:
        offsets = input_lod(ins, "Logits", "warpctc")[-1]
        loff = input_lod(ins, "Label", "warpctc")[-1]
        lengths, llen = np.diff(offsets), np.diff(loff)
        if lengths.size != llen.size:
            raise InvalidArgumentError(
                f"warpctc: Logits hold {lengths.size} sequences but Label {llen.size}; feed "
                f"one label sequence per logits sequence")
        t, lmax = int(lengths.max(initial=0)), int(llen.max(initial=0))
        steps = np.arange(t)
        rows = np.where(steps[None] < lengths[:, None], offsets[:-1, None] + steps[None], 0)
        logits = x[xp.asarray(rows)]
        pos = np.arange(lmax)
        lrows = np.where(pos[None] < llen[:, None], loff[:-1, None] + pos[None], 0)
        labels = label.reshape(-1)[xp.asarray(lrows)] if lmax else \
            xp.zeros((lengths.size, 0), dtype=np.int64)
        return logits, lengths, labels.astype(np.int64), llen
    lengths = host(ins["LogitsLength"]).reshape(-1).astype(np.int64)
    llen = host(ins["LabelLength"]).reshape(-1).astype(np.int64)
    n = x.shape[1]
    if lengths.size != n or llen.size != n or (n and (lengths.max() > x.shape[0] or
                                                      llen.max() > label.shape[1])):
        raise InvalidArgumentError(
            f"warpctc: LogitsLength {lengths.tolist()} and LabelLength {llen.tolist()} must "
            f"give one length per sequence of Logits {list(x.shape)} (time-major) and Label "
            f"{list(label.shape)}, within their padded sizes")
    return x.transpose(1, 0, 2), lengths, label.reshape(n, -1).astype(np.int64), llen


def _ctc(xp, logits, lengths, labels, llen, blank: int):
    """(loss [N], d loss / d logits [N, T, C]) with 0 for impossible labels."""
    n, t, c = logits.shape
    if labels.size and (int(labels.max()) >= c or int(labels.min()) < 0 or
                        bool((labels == blank).any() and _blank_inside(labels, llen, blank))):
        raise InvalidArgumentError(
            f"warpctc: Label must hold classes in [0, {c - 1}] other than blank={blank}, got "
            f"values in [{int(labels.min())}, {int(labels.max())}]")
    shifted = logits - logits.max(axis=2, keepdims=True)
    logp = shifted - xp.log(xp.exp(shifted).sum(axis=2, keepdims=True))
    s = 2 * labels.shape[1] + 1
    ext = xp.full((n, s), blank, dtype=np.int64)
    ext[:, 1::2] = labels
    skip = xp.zeros((n, s), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    lp = xp.take_along_axis(logp, xp.broadcast_to(ext[:, None, :], (n, t, s)), axis=2)
    lengths_x, llen_x = xp.asarray(lengths), xp.asarray(llen)
    alpha = xp.full((n, t, s), NEG, dtype=logits.dtype)
    beta = xp.full((n, t, s), NEG, dtype=logits.dtype)
    if t:
        alpha[:, 0, 0] = lp[:, 0, 0]
        if s > 1:
            alpha[:, 0, 1] = xp.where(llen_x > 0, lp[:, 0, 1], NEG)
    for k in range(1, t):
        prev = alpha[:, k - 1]
        step = _lse(xp, prev, _shift(xp, prev, 1),
                    xp.where(skip, _shift(xp, prev, 2), NEG)) + lp[:, k]
        alpha[:, k] = xp.where((k < lengths_x)[:, None], step, NEG)
    rows = xp.arange(n)
    last_t = xp.asarray(np.maximum(lengths - 1, 0))
    end = xp.asarray(2 * llen)
    final = alpha[rows, last_t]
    log_p = _lse(xp, final[rows, end], xp.where(llen_x > 0, final[rows, xp.maximum(end - 1, 0)],
                                                NEG))
    ends = xp.zeros((n, s), dtype=bool)
    ends[rows, end] = True
    ends[rows, xp.maximum(end - 1, 0)] |= llen_x > 0
    nxt_skip = xp.zeros((n, s), dtype=bool)  # s -> s + 2 allowed
    nxt_skip[:, :-2] = skip[:, 2:]
    for k in range(t - 1, -1, -1):
        if k + 1 < t:
            nb = beta[:, k + 1] + lp[:, k + 1]
            back = _lse(xp, nb, _unshift(xp, nb, 1), xp.where(nxt_skip, _unshift(xp, nb, 2),
                                                              NEG))
        else:
            back = xp.full((n, s), NEG, dtype=logits.dtype)
        at_end = (k == lengths_x - 1)[:, None]
        beta[:, k] = xp.where(at_end, xp.where(ends, 0.0, NEG),
                              xp.where((k < lengths_x - 1)[:, None], back, NEG))
    possible = (log_p > NEG / 2) & (lengths_x > 0)
    post = xp.exp(alpha + beta - log_p[:, None, None])  # [N, T, S]
    onehot = (ext[:, :, None] == xp.arange(c)).astype(logits.dtype)  # [N, S, C]
    grad = xp.exp(logp) - xp.einsum("nts,nsc->ntc", post, onehot)
    mask = ((xp.arange(t)[None, :] < lengths_x[:, None]) & possible[:, None])
    grad = grad * mask[:, :, None]
    loss = xp.where(possible, -log_p, 0.0).astype(logits.dtype)
    return loss, grad


def _unshift(xp, a, k: int):
    """a moved k places back along the last axis, NEG filling the end."""
    out = xp.full(a.shape, NEG, dtype=a.dtype)
    out[..., :-k] = a[..., k:]
    return out


def _blank_inside(labels, llen, blank: int) -> bool:
    lab, lens = host(labels), np.asarray(llen)
    valid = np.arange(lab.shape[1])[None] < lens[:, None]
    return bool((lab[valid] == blank).any())


@kernel("warpctc")
def warpctc(xp, ins, attrs, want):
    logits, lengths, labels, llen = _ctc_layout(xp, ins)
    loss, grad = _ctc(xp, logits, lengths, labels, llen, attrs["blank"])
    x = ins["Logits"]
    if ins.get("LogitsLength") is None:
        t = logits.shape[1]
        mask = np.arange(t)[None] < lengths[:, None]
        grad_out = grad[xp.asarray(mask)]
    else:
        grad_out = grad.transpose(1, 0, 2)
    return {"Loss": loss.reshape(-1, 1), "WarpCTCGrad": grad_out.reshape(x.shape)}


@kernel("warpctc_grad")
def warpctc_grad(xp, ins, attrs, want):
    grad, x = ins["WarpCTCGrad"], ins["Logits"]
    d_loss = ins.get("Loss@GRAD")
    padded = ins.get("LogitsLength") is not None
    if padded:
        lengths = host(ins["LogitsLength"]).reshape(-1)
    else:
        lengths = np.diff(input_lod(ins, "Logits", "warpctc_grad")[-1])
    n = lengths.size
    scale = xp.ones((n,), dtype=x.dtype) if d_loss is None else d_loss.reshape(-1)
    if attrs["norm_by_times"]:
        scale = scale / xp.asarray(np.maximum(lengths, 1).astype(x.dtype))
    if padded:
        dx = grad * scale[None, :, None]
    else:
        seg = xp.asarray(np.repeat(np.arange(n), lengths))
        dx = grad * scale[seg][:, None]
    return {"Logits@GRAD": dx.astype(x.dtype, copy=False)}


def _sequences(ins, slot: str, length_slot: str, op: str) -> list:
    """The int token sequences of `slot` (host arrays), from its LoD or its lengths."""
    x = host(ins[slot])
    if ins.get(length_slot) is None:
        offsets = input_lod(ins, slot, op)[-1]
        flat = x.reshape(-1)
        return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    lengths = host(ins[length_slot]).reshape(-1)
    x = x.reshape(x.shape[0], -1)
    if lengths.size != x.shape[0] or (lengths.size and (lengths.max() > x.shape[1] or
                                                        lengths.min() < 0)):
        raise InvalidArgumentError(
            f"{op}: {length_slot} {lengths.tolist()} must give one length in [0, "
            f"{x.shape[1]}] per row of {slot} {list(x.shape)}")
    return [x[i, :k] for i, k in enumerate(lengths.tolist())]


def _align(tokens: np.ndarray, blank: int, merge: bool) -> np.ndarray:
    if merge and tokens.size:
        keep = np.ones(tokens.size, dtype=bool)
        keep[1:] = tokens[1:] != tokens[:-1]
        tokens = tokens[keep]
    return tokens[tokens != blank]


@kernel("ctc_align")
def ctc_align(xp, ins, attrs, want):
    x = ins["Input"]
    seqs = _sequences(ins, "Input", "InputLength", "ctc_align")
    out = [_align(s, attrs["blank"], attrs["merge_repeated"]) for s in seqs]
    if ins.get("InputLength") is not None:
        padded = np.full(tuple(x.shape), attrs["padding_value"], dtype=host(x).dtype)
        for i, s in enumerate(out):
            padded[i, :s.size] = s
        lengths = np.array([[s.size] for s in out], dtype=np.int64)
        return {"Output": xp.asarray(padded), "OutputLength": xp.asarray(lengths),
                "Output@LOD": None}
    lod = input_lod(ins, "Input", "ctc_align")
    offsets = np.concatenate([[0], np.cumsum([s.size for s in out])]).astype(np.int64)
    flat = np.concatenate(out) if out else np.zeros(0, dtype=host(x).dtype)
    if flat.size == 0:  # fluid's answer when every sequence comes out empty
        flat = np.array([-1], dtype=host(x).dtype)
    new_lod = make_lod(list(lod[:-1]) + [offsets])
    return {"Output": xp.asarray(flat.reshape(-1, 1)), "Output@LOD": new_lod}


def levenshtein(hyp: np.ndarray, ref: np.ndarray) -> int:
    """Edit distance, one DP row at a time: with a[j] = min(up + 1, diagonal + cost), the row
    is d[j] = min over k <= j of a[k] + (j - k), a running minimum."""
    m = ref.size
    row = np.arange(m + 1)
    cols = np.arange(m + 1)
    for i, token in enumerate(hyp.tolist(), start=1):
        a = np.empty(m + 1, dtype=np.int64)
        a[0] = i
        a[1:] = np.minimum(row[1:] + 1, row[:-1] + (ref != token))
        row = cols + np.minimum.accumulate(a - cols)
    return int(row[-1])


@kernel("edit_distance")
def edit_distance(xp, ins, attrs, want):
    hyps = _sequences(ins, "Hyps", "HypsLength", "edit_distance")
    refs = _sequences(ins, "Refs", "RefsLength", "edit_distance")
    if len(hyps) != len(refs):
        raise InvalidArgumentError(
            f"edit_distance: {len(hyps)} hypothesis sequences but {len(refs)} references; "
            f"feed one reference per hypothesis")
    out = np.zeros((len(hyps), 1), dtype=np.float32)
    for i, (h, r) in enumerate(zip(hyps, refs)):
        if attrs["normalized"] and r.size == 0:
            raise InvalidArgumentError(
                f"edit_distance: reference {i} is empty, so normalized=True would divide by "
                f"0; drop empty references or use normalized=False")
        dist = levenshtein(h, r)
        out[i, 0] = dist / r.size if attrs["normalized"] else dist
    return {"Out": xp.asarray(out), "SequenceNum": xp.asarray(np.array([len(hyps)], np.int64))}


@kernel("sequence_erase")
def sequence_erase(xp, ins, attrs, want):
    x = host(ins["X"])
    lod = input_lod(ins, "X", "sequence_erase")
    offsets = lod[-1]
    keep = ~np.isin(x.reshape(-1), np.asarray(attrs["tokens"], dtype=x.dtype))
    kept = np.concatenate([[0], np.cumsum(keep)]).astype(np.int64)
    new_lod = make_lod(list(lod[:-1]) + [kept[offsets]])
    return {"Out": xp.asarray(x.reshape(-1)[keep].reshape(-1, 1)), "Out@LOD": new_lod}
