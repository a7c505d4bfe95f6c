"""Kernels: sync_batch_norm and its gradient. Per-channel sums are taken locally, then summed
over the data-parallel world through the KernelContext's communicator (at once: the
normalization needs them), so the statistics and the input gradient are those of the whole
global batch.

Two passes (the sum, then the sum of squared deviations from the global mean) rather than
E[x^2] - E[x]^2, which loses digits to cancellation: the result then matches one process on
the whole batch to float round-off."""
from __future__ import annotations

from .registry import kernel


def _channel_view(x, layout: str):
    """(reduce axes, broadcast shape of a per-channel vector)."""
    c_axis = 1 if layout == "NCHW" else x.ndim - 1
    axes = tuple(i for i in range(x.ndim) if i != c_axis)
    return axes, tuple(x.shape[i] if i == c_axis else 1 for i in range(x.ndim))


def _world_sum(xp, comm, *parts):
    """Each part (per-channel vectors or scalars) summed over every place of every rank."""
    flat = [xp.asarray(p, dtype="float64").reshape(-1) for p in parts]
    buf = xp.concatenate(flat)
    buf = comm.iallreduce(buf, overlap=False).wait()
    out, start = [], 0
    for p in flat:
        out.append(buf[start:start + p.size])
        start += p.size
    return out


def _uses_batch_stats(attrs) -> bool:
    return not ((attrs["is_test"] and not attrs["trainable_statistics"])
                or attrs["use_global_stats"])


@kernel("sync_batch_norm", context=True)
def sync_batch_norm(xp, ins, attrs, want, ctx):
    x, scale, bias = ins["X"], ins["Scale"], ins["Bias"]
    mean_in, var_in = ins["Mean"], ins["Variance"]
    axes, cshape = _channel_view(x, attrs["data_layout"])
    eps = attrs["epsilon"]
    res = {}
    if not _uses_batch_stats(attrs):
        mean, var = mean_in, var_in
        res["MeanOut"], res["VarianceOut"] = mean_in.copy(), var_in.copy()
    else:
        comm = ctx.comm
        local_count = x.size // mean_in.size
        total, count = _world_sum(xp, comm, x.sum(axis=axes, dtype="float64"), [local_count])
        mean = total / count[0]
        (sq,) = _world_sum(xp, comm, ((x - mean.reshape(cshape)) ** 2).sum(axis=axes))
        var = sq / count[0]
        momentum = attrs["momentum"]
        if ins.get("MomentumTensor") is not None:
            momentum = float(ins["MomentumTensor"].reshape(-1)[0])
        res["MeanOut"] = (mean_in * momentum + mean * (1.0 - momentum)).astype(mean_in.dtype)
        res["VarianceOut"] = (var_in * momentum + var * (1.0 - momentum)).astype(var_in.dtype)
    inv_std = 1.0 / xp.sqrt(var + eps)
    y = (x - mean.reshape(cshape)) * (inv_std * scale).reshape(cshape) + bias.reshape(cshape)
    res.update(Y=y.astype(x.dtype, copy=False), SavedMean=mean.astype(x.dtype),
               SavedVariance=inv_std.astype(x.dtype))
    if "ReserveSpace" in want:
        res["ReserveSpace"] = xp.zeros((0,), dtype=x.dtype)
    return res


@kernel("sync_batch_norm_grad", context=True)
def sync_batch_norm_grad(xp, ins, attrs, want, ctx):
    """Scale@GRAD and Bias@GRAD stay this place's sums (the data-parallel allreduce adds them up
    like any parameter gradient); X@GRAD needs the world's sums and count."""
    x, scale, dy = ins["X"], ins["Scale"], ins["Y@GRAD"]
    axes, cshape = _channel_view(x, attrs["data_layout"])
    batch_stats = _uses_batch_stats(attrs)
    if batch_stats:
        mean, inv_std = ins["SavedMean"], ins["SavedVariance"]
    else:
        mean = ins["Mean"]
        inv_std = 1.0 / xp.sqrt(ins["Variance"] + attrs["epsilon"])
    xhat = (x - mean.reshape(cshape)) * inv_std.reshape(cshape)
    dbias, dscale = dy.sum(axis=axes), (dy * xhat).sum(axis=axes)
    res = {}
    if "X@GRAD" in want:
        k = (scale * inv_std).reshape(cshape)
        if batch_stats:
            g_bias, g_scale, count = _world_sum(xp, ctx.comm, dbias, dscale,
                                                [x.size // scale.size])
            dx = k * (dy - (g_bias.reshape(cshape) + xhat * g_scale.reshape(cshape))
                      / count[0])
        else:
            dx = dy * k
        res["X@GRAD"] = dx.astype(x.dtype, copy=False)
    if "Scale@GRAD" in want:
        res["Scale@GRAD"] = dscale.astype(scale.dtype, copy=False)
    if "Bias@GRAD" in want:
        res["Bias@GRAD"] = dbias.astype(scale.dtype, copy=False)
    return res
