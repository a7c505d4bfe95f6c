"""Kernels: hierarchical_sigmoid, nce and sample_logits, computed as fluid 1.8's CPU kernels
do (the -40/40 clip and the log 2 of padded path slots in hsigmoid, nce's sampler
probabilities, sample_logits' -1e20 on accidental hits).

>>> # get_kernel("hierarchical_sigmoid")(np, {"X": x, "W": w, "Label": y}, attrs, want)
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from .registry import kernel
from .tensor import _scatter_add

_HIT_PENALTY = 1e20  # what fluid subtracts from an accidental hit's logit


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _log_uniform_p(xp, ids, span: int):
    """fluid's LogUniformSampler(span): ids in [0, span) with P(v) = log((v + 2) / (v + 1)) /
    log(span + 1), which sums to 1 over the span."""
    v = ids.astype(np.float64)
    return xp.log((v + 2.0) / (v + 1.0)) / np.log(span + 1.0)


def _log_uniform_draw(rng, shape, span: int):
    return np.exp(rng.random(shape) * np.log(span + 1.0)).astype(np.int64) - 1


# -- hierarchical_sigmoid --------------------------------------------------------------------

def _tree_paths(xp, ins, attrs, width: int):
    """(node index, branch bit, valid) per sample and path slot, [N, width] each."""
    if ins.get("PathTable") is not None:
        table = ins["PathTable"].astype(np.int64)
        # a path ends at its first negative entry (fluid's CustomCode)
        valid = xp.cumprod(table >= 0, axis=1).astype(bool)
        bits = ins["PathCode"] != 0
        return xp.where(valid, table, 0), bits & valid, valid
    n_cls = attrs["num_classes"]
    code = ins["Label"].reshape(-1).astype(np.int64) + n_cls  # fluid's SimpleCode
    if code.size and (int(code.min()) < n_cls or int(code.max()) >= 2 * n_cls):
        raise InvalidArgumentError(
            f"hsigmoid: Label holds a class outside [0, {n_cls}) (num_classes={n_cls})")
    length = xp.floor(xp.log2(code.astype(np.float64))).astype(np.int64)
    slot = xp.arange(width)[None, :]
    valid = slot < length[:, None]
    idx = (code[:, None] >> (slot + 1)) - 1
    bits = ((code[:, None] >> slot) & 1).astype(bool)
    return xp.where(valid, idx, 0), bits & valid, valid


def _check_nodes(idx, valid, rows: int):
    used = _host(idx)[_host(valid)]
    if used.size and int(used.max()) >= rows:
        raise InvalidArgumentError(
            f"hsigmoid: a path visits node {int(used.max())} but W has {rows} rows; the "
            f"path table must hold node ids in [0, {rows})")


@kernel("hierarchical_sigmoid")
def hierarchical_sigmoid(xp, ins, attrs, want):
    x, w, bias = ins["X"], ins["W"], ins.get("Bias")
    width = ins["PathTable"].shape[1] if ins.get("PathTable") is not None else max(
        int(attrs["num_classes"] - 1).bit_length(), 1)
    idx, bits, valid = _tree_paths(xp, ins, attrs, width)
    _check_nodes(idx, valid, w.shape[0])
    z = xp.einsum("nd,nld->nl", x, w[idx])
    if bias is not None:
        z = z + bias.reshape(-1)[idx]
    z = xp.clip(xp.where(valid, z, 0), -40.0, 40.0)
    softplus = xp.log1p(xp.exp(z))
    # fluid sums the softplus over every slot, a padded slot (z = 0) adding log 2
    out = softplus.sum(axis=1) - (bits * z).sum(axis=1)
    res = {"Out": out.reshape(-1, 1).astype(x.dtype, copy=False),
           "PreOut": softplus.astype(x.dtype, copy=False)}
    if "W_Out" in want:
        res["W_Out"] = w.copy()
    return res


@kernel("hierarchical_sigmoid_grad")
def hierarchical_sigmoid_grad(xp, ins, attrs, want):
    x, w, pre = ins["X"], ins["W"], ins["PreOut"]
    idx, bits, valid = _tree_paths(xp, ins, attrs, pre.shape[1])
    # PreOut holds softplus(z); 1 - exp(-softplus(z)) is sigmoid(z)
    d = xp.where(valid, (1.0 - xp.exp(-pre) - bits) * ins["Out@GRAD"].reshape(-1, 1), 0)
    res = {}
    if "X@GRAD" in want:
        res["X@GRAD"] = xp.einsum("nl,nld->nd", d, w[idx]).astype(x.dtype, copy=False)
    if "W@GRAD" in want:
        dw = xp.zeros_like(w)
        _scatter_add(xp, dw, idx.reshape(-1), (d[:, :, None] * x[:, None, :]).reshape(
            -1, x.shape[1]))
        res["W@GRAD"] = dw
    if "Bias@GRAD" in want:
        db = xp.zeros(ins["Bias"].shape[0], dtype=x.dtype)
        _scatter_add(xp, db, idx.reshape(-1), d.reshape(-1))
        res["Bias@GRAD"] = db.reshape(ins["Bias"].shape)
    return res


# -- nce ---------------------------------------------------------------------------------------

def _nce_probability(xp, ins, attrs, classes):
    """The sampler's probability of each class id in `classes` (fluid's Sampler)."""
    k = attrs["num_total_classes"]
    if attrs["sampler"] == 0:
        return xp.full(classes.shape, 1.0 / k)
    if attrs["sampler"] == 1:  # fluid's nce samples log-uniformly over [0, k - 1)
        return _log_uniform_p(xp, classes, k - 1)
    return ins["CustomDistProbs"].reshape(-1).astype(np.float64)[classes]


def _nce_negatives(attrs, ctx, ins, shape):
    """Negative class ids drawn by the op's sampler (numpy, on the host)."""
    if attrs["custom_neg_classes"]:
        return np.broadcast_to(np.asarray(attrs["custom_neg_classes"], np.int64), shape)
    rng = np.random.default_rng(attrs["seed"]) if attrs["seed"] else ctx.rng
    k = attrs["num_total_classes"]
    if attrs["sampler"] == 0:
        return rng.integers(0, k, size=shape)
    if attrs["sampler"] == 1:
        return _log_uniform_draw(rng, shape, k - 1)
    probs = _host(ins["CustomDistProbs"]).reshape(-1).astype(np.float64)
    return rng.choice(k, size=shape, p=probs / probs.sum())


@kernel("nce", context=True)
def nce(xp, ins, attrs, want, ctx):
    x, label, w, bias = ins["Input"], ins["Label"], ins["Weight"], ins.get("Bias")
    n, n_true = label.shape
    k = attrs["num_total_classes"]
    lab = _host(label).astype(np.int64)
    if lab.size and (lab.min() < 0 or lab.max() >= k):
        raise InvalidArgumentError(
            f"nce: Label holds class {int(lab.min() if lab.min() < 0 else lab.max())}, "
            f"expected ids in [0, {k}) (num_total_classes)")
    neg = _nce_negatives(attrs, ctx, ins, (n, attrs["num_neg_samples"]))
    samples = xp.asarray(np.concatenate([lab, neg], axis=1))
    z = xp.einsum("nd,nsd->ns", x, w[samples])
    if bias is not None:
        z = z + bias.reshape(-1)[samples]
    o = 1.0 / (1.0 + xp.exp(-z))
    b = _nce_probability(xp, ins, attrs, samples) * attrs["num_neg_samples"]
    is_true = xp.arange(samples.shape[1])[None, :] < n_true
    with np.errstate(divide="ignore"):
        cost = -xp.log(xp.where(is_true, o, b) / (o + b))
    sw = ins.get("SampleWeight")
    cost = cost.sum(axis=1, keepdims=True) * (1.0 if sw is None else sw.reshape(-1, 1))
    return {"Cost": cost.astype(x.dtype, copy=False), "SampleLogits": o.astype(x.dtype),
            "SampleLabels": samples}


@kernel("nce_grad")
def nce_grad(xp, ins, attrs, want):
    x, w, bias = ins["Input"], ins["Weight"], ins.get("Bias")
    o, samples = ins["SampleLogits"].astype(np.float64), ins["SampleLabels"]
    n_true = samples.shape[1] - attrs["num_neg_samples"]
    b = _nce_probability(xp, ins, attrs, samples) * attrs["num_neg_samples"]
    is_true = xp.arange(samples.shape[1])[None, :] < n_true
    d = xp.where(is_true, (o - 1.0) * b / (o + b), o * (1.0 - o) / (o + b))
    scale = ins["Cost@GRAD"].reshape(-1, 1)
    if ins.get("SampleWeight") is not None:
        scale = scale * ins["SampleWeight"].reshape(-1, 1)
    d = (d * scale).astype(x.dtype)
    res = {}
    if "Input@GRAD" in want:
        res["Input@GRAD"] = xp.einsum("ns,nsd->nd", d, w[samples])
    if "Weight@GRAD" in want:
        dw = xp.zeros_like(w)
        _scatter_add(xp, dw, samples.reshape(-1),
                     (d[:, :, None] * x[:, None, :]).reshape(-1, x.shape[1]))
        res["Weight@GRAD"] = dw
    if "Bias@GRAD" in want and bias is not None:
        db = xp.zeros(bias.shape[0], dtype=x.dtype)
        _scatter_add(xp, db, samples.reshape(-1), d.reshape(-1))
        res["Bias@GRAD"] = db.reshape(bias.shape)
    return res


# -- sample_logits -----------------------------------------------------------------------------

def _log_uniform_unique(rng, k: int, s: int):
    """s distinct ids from the log-uniform sampler over [0, k) and the number of draws it
    took."""
    seen: dict = {}
    tries = 0
    while len(seen) < s:
        draws = _log_uniform_draw(rng, (s,), k)
        for v in draws:
            tries += 1
            seen.setdefault(int(v), None)
            if len(seen) == s:
                break
    return np.fromiter(seen, np.int64, count=s), tries


def _draw_samples(attrs, ctx, labels, k: int):
    """(samples [N, NT + S], probabilities) of fluid's sample_logits with its own sampler:
    the true labels first, then S distinct log-uniform negatives shared by the batch."""
    s = attrs["num_samples"]
    rng = np.random.default_rng(attrs["seed"]) if attrs["seed"] else ctx.rng
    neg, tries = _log_uniform_unique(rng, k, s)
    samples = np.concatenate([labels, np.broadcast_to(neg, (labels.shape[0], s))], axis=1)
    p = _log_uniform_p(np, samples, k)
    if tries == s:
        # no draw was repeated: fluid takes the expected count q * S, not a probability
        return samples, p * s
    # the chance that a class shows up at least once in `tries` draws
    return samples, -np.expm1(tries * np.log1p(-p))


@kernel("sample_logits", context=True)
def sample_logits(xp, ins, attrs, want, ctx):
    logits, labels = ins["Logits"], ins["Labels"]
    nt = labels.shape[1]
    if attrs["use_customized_samples"]:
        samples, probs = ins["CustomizedSamples"], ins["CustomizedProbabilities"]
    else:
        s, p = _draw_samples(attrs, ctx, _host(labels).astype(np.int64), logits.shape[1])
        samples, probs = xp.asarray(s), xp.asarray(p.astype(logits.dtype))
    picked = xp.take_along_axis(logits, samples, axis=1) - xp.log(probs)
    if attrs["remove_accidental_hits"]:
        hit = (samples[:, nt:, None] == labels[:, None, :]).any(axis=2)
        picked[:, nt:] -= xp.where(hit, _HIT_PENALTY, 0).astype(picked.dtype)
    n = logits.shape[0]
    res = {"Samples": samples, "Probabilities": probs,
           "SampledLogits": picked.astype(logits.dtype, copy=False),
           "SampledLabels": xp.broadcast_to(xp.arange(nt, dtype=np.int64), (n, nt)).copy()}
    if "LogitsDim" in want:  # fluid's shape records, kept for programs that fetch them
        res["LogitsDim"] = xp.asarray(logits.shape, dtype=np.int64)
    if "LabelsDim" in want:
        res["LabelsDim"] = xp.asarray(labels.shape, dtype=np.int64)
    return res


@kernel("sample_logits_grad")
def sample_logits_grad(xp, ins, attrs, want):
    logits, samples = ins["Logits"], ins["Samples"]
    dx = xp.zeros_like(logits)
    rows = xp.broadcast_to(xp.arange(logits.shape[0])[:, None], samples.shape)
    _scatter_add(xp, dx, (rows, samples), ins["SampledLogits@GRAD"])
    return {"Logits@GRAD": dx}
