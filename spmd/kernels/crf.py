"""Kernels: linear_chain_crf (and its gradient), crf_decoding and chunk_eval (the ops are
described in spmd/ops/crf.py).

Both input forms are brought to one padded layout [N, T, D] with a mask of the real steps, and
the sequences run together, step by step: the forward recursion in log space (log-sum-exp, so
long sequences neither overflow nor underflow), the gradient from the marginals of the forward
and backward recursions, Viterbi by max-plus. chunk_eval parses tags on the host, as fluid does.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ops.crf import CHUNK_SCHEMES
from .registry import kernel
from .sequence import input_lod


def host(a) -> np.ndarray:
    """A numpy copy of a (numpy or cupy) array."""
    return a if isinstance(a, np.ndarray) else np.asarray(a.get() if hasattr(a, "get") else a)


class Padded:
    """Emission (and Label) as [N, T, ...] with `mask` [N, T] of the real steps; `unpad`
    returns a padded result to the input's layout."""

    def __init__(self, xp, ins, op: str):
        x = ins["Emission"]
        self.lod_mode = ins.get("Length") is None
        if self.lod_mode:
            offsets = input_lod(ins, "Emission", op)[-1]
            if int(offsets[-1]) != x.shape[0]:
                raise InvalidArgumentError(
                    f"{op}: Emission has {x.shape[0]} rows but its LoD {offsets.tolist()} "
                    f"covers {int(offsets[-1])}")
            self.lengths = np.diff(offsets)
            t = int(self.lengths.max()) if self.lengths.size else 0
            steps = np.arange(t)
            mask = steps[None, :] < self.lengths[:, None]
            rows = np.where(mask, offsets[:-1, None] + steps[None, :], 0)
            self.rows = xp.asarray(rows)
            self.mask = xp.asarray(mask)
            self.emission = x[self.rows] * self.mask[:, :, None]
        else:
            self.lengths = host(ins["Length"]).reshape(-1).astype(np.int64)
            n, t = x.shape[0], x.shape[1]
            if self.lengths.size != n or (n and (self.lengths.max() > t or
                                                 self.lengths.min() < 0)):
                raise InvalidArgumentError(
                    f"{op}: Length {self.lengths.tolist()} must give one length in [0, {t}] "
                    f"for each of the {n} padded sequences of Emission {list(x.shape)}")
            self.mask = xp.asarray(np.arange(t)[None, :] < self.lengths[:, None])
            self.emission = x * self.mask[:, :, None]
        self.xp_lengths = xp.asarray(self.lengths)

    def labels(self, xp, label, op: str):
        """Label as [N, T] int64 (0 on padding), checked against the tags."""
        if self.lod_mode:
            flat = label.reshape(-1)
            if flat.shape[0] != int(self.lengths.sum()):
                raise InvalidArgumentError(
                    f"{op}: Label has {flat.shape[0]} rows but Emission's LoD covers "
                    f"{int(self.lengths.sum())}; feed one tag per emission row")
            y = flat[self.rows]
        else:
            y = label.reshape(label.shape[0], -1)
            if y.shape != self.mask.shape:
                raise InvalidArgumentError(
                    f"{op}: padded Label must be [{self.mask.shape[0]}, {self.mask.shape[1]}] "
                    f"(or with a trailing 1) like Emission, got {list(label.shape)}")
        y = xp.where(self.mask, y, 0).astype(np.int64)
        d = self.emission.shape[2]
        if y.size and (int(y.max()) >= d or int(y.min()) < 0):
            raise InvalidArgumentError(
                f"{op}: Label holds tags in [{int(y.min())}, {int(y.max())}] but Emission has "
                f"{d} tags; tags must be in [0, {d - 1}]")
        return y

    def unpad(self, xp, padded):
        return padded[self.mask] if self.lod_mode else padded


def _lse(xp, a, axis: int):
    m = a.max(axis=axis, keepdims=True)
    return (m + xp.log(xp.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _forward(xp, p: Padded, w):
    """Log-space alphas [N, T, D] and log Z [N] (0 for an empty sequence)."""
    e = p.emission
    n, t, d = e.shape
    alpha = xp.zeros_like(e)
    if t:
        alpha[:, 0] = w[0] + e[:, 0]
    for s in range(1, t):
        alpha[:, s] = _lse(xp, alpha[:, s - 1][:, :, None] + w[2:][None], 1) + e[:, s]
    last = alpha[xp.arange(n), xp.asarray(np.maximum(p.lengths - 1, 0))] if t else \
        xp.zeros((n, d), dtype=e.dtype)
    log_z = xp.where(p.xp_lengths > 0, _lse(xp, last + w[1], 1), 0.0)
    return alpha, log_z


def _one_hot(xp, y, d: int, dtype):
    return (y[..., None] == xp.arange(d)).astype(dtype)


def _gold(xp, p: Padded, w, oh):
    """The score of the label path of each sequence."""
    e, mask = p.emission, p.mask.astype(p.emission.dtype)
    score = (e * oh).sum(axis=(1, 2))
    if e.shape[1]:
        score = score + (oh[:, 0] * w[0]).sum(1) * mask[:, 0]
        last = oh[xp.arange(e.shape[0]), xp.asarray(np.maximum(p.lengths - 1, 0))]
        score = score + (last * w[1]).sum(1) * mask[:, 0]
        pairs = xp.einsum("nti,ij,ntj->nt", oh[:, :-1], w[2:], oh[:, 1:])
        score = score + (pairs * mask[:, 1:]).sum(1)
    return score


@kernel("linear_chain_crf")
def linear_chain_crf(xp, ins, attrs, want):
    w = ins["Transition"]
    p = Padded(xp, ins, "linear_chain_crf")
    oh = _one_hot(xp, p.labels(xp, ins["Label"], "linear_chain_crf"), w.shape[1], w.dtype)
    oh = oh * p.mask[:, :, None]
    alpha, log_z = _forward(xp, p, w)
    nll = (log_z - _gold(xp, p, w, oh)).reshape(-1, 1).astype(w.dtype, copy=False)
    x = ins["Emission"]
    # fluid's intermediates: per-step normalized alphas, exp of max-shifted emissions, exp(w)
    norm_alpha = xp.exp(alpha - _lse(xp, alpha, 2)[:, :, None]) * p.mask[:, :, None]
    return {"LogLikelihood": nll, "Alpha": p.unpad(xp, norm_alpha),
            "EmissionExps": xp.exp(x - x.max(axis=-1, keepdims=True)),
            "TransitionExps": xp.exp(w)}


def _backward_betas(xp, p: Padded, w):
    e = p.emission
    n, t, d = e.shape
    beta = xp.zeros_like(e)
    lengths = p.xp_lengths
    for s in range(t - 1, -1, -1):
        at_end = (lengths - 1 == s)[:, None]
        inner = (lengths - 1 > s)[:, None]
        step = _lse(xp, w[2:][None] + (e[:, s + 1] + beta[:, s + 1])[:, None, :], 2) \
            if s + 1 < t else xp.zeros((n, d), dtype=e.dtype)
        beta[:, s] = xp.where(at_end, w[1][None], xp.where(inner, step, 0.0))
    return beta


@kernel("linear_chain_crf_grad")
def linear_chain_crf_grad(xp, ins, attrs, want):
    w = ins["Transition"]
    p = Padded(xp, ins, "linear_chain_crf_grad")
    e = p.emission
    n, t, d = e.shape
    maskf = p.mask.astype(w.dtype)[:, :, None]
    oh = _one_hot(xp, p.labels(xp, ins["Label"], "linear_chain_crf_grad"), d, w.dtype) * maskf
    alpha, log_z = _forward(xp, p, w)
    beta = _backward_betas(xp, p, w)
    g = ins.get("LogLikelihood@GRAD")
    g = xp.ones((n,), dtype=w.dtype) if g is None else g.reshape(-1)
    marg = xp.exp(alpha + beta - log_z[:, None, None]) * maskf
    de = (marg - oh) * g[:, None, None]
    dw = xp.zeros_like(w)
    if t:
        last = xp.asarray(np.maximum(p.lengths - 1, 0))
        rows = xp.arange(n)
        dw[0] = (de[:, 0]).sum(0)
        dw[1] = (de[rows, last]).sum(0)
        # pairwise marginals of (y_{s-1}, y_s), minus the label's pairs
        for s in range(1, t):
            pair = xp.exp(alpha[:, s - 1][:, :, None] + w[2:][None] +
                          (e[:, s] + beta[:, s])[:, None, :] - log_z[:, None, None])
            dw[2:] += ((pair - oh[:, s - 1][:, :, None] * oh[:, s][:, None, :]) *
                       (maskf[:, s, 0] * g)[:, None, None]).sum(0)
    out = {"Emission@GRAD": p.unpad(xp, de).reshape(ins["Emission"].shape),
           "Transition@GRAD": dw}
    return {k: v for k, v in out.items() if k in want}


@kernel("crf_decoding")
def crf_decoding(xp, ins, attrs, want):
    w = ins["Transition"]
    p = Padded(xp, ins, "crf_decoding")
    e = p.emission
    n, t, d = e.shape
    path = xp.zeros((n, t), dtype=np.int64)
    if t:
        score = w[0] + e[:, 0]
        back = xp.zeros((n, t, d), dtype=np.int64)
        for s in range(1, t):
            cand = score[:, :, None] + w[2:][None]
            back[:, s] = cand.argmax(axis=1)  # the first best, as fluid's strict '>' keeps
            step = cand.max(axis=1) + e[:, s]
            # a finished sequence keeps its final scores
            score = xp.where((s < p.xp_lengths)[:, None], step, score)
        best = (score + w[1]).argmax(axis=1)
        rows = xp.arange(n)
        follow = best
        for s in range(t - 1, -1, -1):
            at_end = p.xp_lengths - 1 == s
            follow = xp.where(at_end, best, follow)
            path[:, s] = xp.where(s < p.xp_lengths, follow, 0)
            if s:
                follow = xp.where(s < p.xp_lengths, back[rows, s, follow], follow)
    if ins.get("Label") is not None:
        path = (path == p.labels(xp, ins["Label"], "crf_decoding")).astype(np.int64) * p.mask
    out = p.unpad(xp, path)
    return {"ViterbiPath": out.reshape(-1, 1) if p.lod_mode else out}


def _segments(tags: np.ndarray, num_types: int, scheme: tuple) -> list:
    """(begin, end, type) of each chunk in one sequence of tags, as fluid's GetSegments."""
    tag_types, begin, inside, end, single = scheme
    other = num_types
    segments, start, in_chunk, tag, kind = [], 0, False, -1, other
    for i, label in enumerate(tags.tolist()):
        prev_tag, prev_kind = tag, kind
        tag, kind = label % tag_types, label // tag_types
        if in_chunk and _chunk_end(prev_tag, prev_kind, tag, kind, other, scheme):
            segments.append((start, i - 1, prev_kind))
            in_chunk = False
        if _chunk_begin(prev_tag, prev_kind, tag, kind, other, scheme):
            start, in_chunk = i, True
    if in_chunk:
        segments.append((start, len(tags) - 1, kind))
    return segments


def _chunk_end(prev_tag, prev_kind, tag, kind, other, scheme) -> bool:
    _, begin, inside, end, single = scheme
    if prev_kind == other:
        return False
    if kind == other or kind != prev_kind:
        return True
    if prev_tag in (begin, inside):
        return tag in (begin, single)
    return prev_tag in (end, single)


def _chunk_begin(prev_tag, prev_kind, tag, kind, other, scheme) -> bool:
    _, begin, inside, end, single = scheme
    if prev_kind == other:
        return kind != other
    if kind == other:
        return False
    if kind != prev_kind or tag in (begin, single):
        return True
    if tag in (inside, end):
        return prev_tag in (end, single)
    return False


def _sequences(ins, op: str):
    """(inference tags, label tags) of each sequence, on the host."""
    infer, label = host(ins["Inference"]), host(ins["Label"])
    lod = ins.get("Label@LOD")
    if lod is not None:
        offsets = lod[-1]
        infer_lod = ins.get("Inference@LOD")
        if infer_lod is not None and not np.array_equal(infer_lod[-1], offsets):
            raise InvalidArgumentError(
                f"{op}: Inference and Label must have the same LoD, got "
                f"{infer_lod[-1].tolist()} (Inference) vs {offsets.tolist()} (Label)")
        infer, label = infer.reshape(-1), label.reshape(-1)
        return [(infer[a:b], label[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    if ins.get("SeqLength") is None:
        raise InvalidArgumentError(
            f"{op}: Label carries no LoD and no SeqLength is given; feed LoD tensors, or "
            f"padded [batch, max length] tags with seq_length=")
    lengths = host(ins["SeqLength"]).reshape(-1)
    infer, label = infer.reshape(lengths.size, -1), label.reshape(lengths.size, -1)
    return [(infer[i, :k], label[i, :k]) for i, k in enumerate(lengths.tolist())]


@kernel("chunk_eval")
def chunk_eval(xp, ins, attrs, want):
    scheme = CHUNK_SCHEMES[attrs["chunk_scheme"]]
    num_types = attrs["num_chunk_types"]
    excluded = set(attrs["excluded_chunk_types"])
    limit = num_types * scheme[0]
    n_infer = n_label = n_correct = 0
    for infer, label in _sequences(ins, "chunk_eval"):
        for what, tags in (("Inference", infer), ("Label", label)):
            if tags.size and (tags.max() > limit or tags.min() < 0):
                raise InvalidArgumentError(
                    f"chunk_eval: {what} holds tag {int(tags.max())}, above num_chunk_types * "
                    f"tag types = {num_types} * {scheme[0]} = {limit} (the 'outside' tag)")
        got, ref = _segments(infer, num_types, scheme), _segments(label, num_types, scheme)
        n_correct += len((set(got) & set(ref)) - {s for s in got if s[2] in excluded})
        n_infer += sum(s[2] not in excluded for s in got)
        n_label += sum(s[2] not in excluded for s in ref)
    precision = n_correct / n_infer if n_infer else 0.0
    recall = n_correct / n_label if n_label else 0.0
    f1 = 2 * precision * recall / (precision + recall) if n_correct else 0.0
    f32 = [xp.asarray(np.array([v], dtype=np.float32)) for v in (precision, recall, f1)]
    i64 = [xp.asarray(np.array([v], dtype=np.int64)) for v in (n_infer, n_label, n_correct)]
    return dict(zip(("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
                     "NumCorrectChunks"), f32 + i64))
