"""Kernels: parameter update ops (sgd, momentum, adam, nadam) and the helpers optimizers use.

Update kernels never write into their inputs on their own: the executor binds ParamOut to
the Param variable's name, so the new array replaces the old one in the scope. sgd, momentum
and adam write their outputs into the arrays the plan offers, where it offers them
(KernelContext.out: in Reduce mode over flat sections, this rank's place in the step's
all-gather buffer, executor/buckets.py; with in-place updates, the buffer of the input of the
same variable when nothing else holds it, executor/inplace.py), with the same operations in
the same order; on numpy they run a chunk at a time (optim_inplace.py), so an update makes no
temporary the size of the parameter.
Scalars (learning rate, beta powers) stay 0-d arrays of the parameter's dtype, so the same code
runs on numpy and on cupy without a device-to-host copy.
"""
from __future__ import annotations

from . import optim_inplace
from .registry import kernel
from .sparse_update import SparseRule, SparseValues


def _scalar(a, dtype):
    """A one-element array as a 0-d array of `dtype` (fluid keeps them as shape [1])."""
    return a.reshape(()).astype(dtype, copy=False)


def _param_out(xp, ctx, p, *others):
    """The array the plan offers for ParamOut, where it fits: p's shape and dtype, and the
    other operands of the last step in p's dtype (so writing there rounds as the plain
    expression does). None otherwise: the kernel then makes a new array."""
    out = ctx.out(xp, "ParamOut")
    if out is None or out.shape != p.shape or out.dtype != p.dtype:
        return None
    if any(o.dtype != p.dtype for o in others):
        return None
    return out


@kernel("sgd", context=True, sparse=SparseRule(rows_only=True), inplace=("ParamOut",),
        spends=("Grad",), pure=True)
def sgd(xp, ins, attrs, want, ctx):
    """p - lr * g. A SelectedRows gradient updates only its rows (merged), in place where the
    plan lends Param's buffer (sparse_update.py): fluid 1.8.5's sparse sgd."""
    p, g, lr = ins["Param"], ins["Grad"], ins["LearningRate"]
    step = -lr.reshape(()).astype(p.dtype)
    if ctx is not None:  # where the plan gives it a place to write: no further checks
        out = optim_inplace.sgd_fast(xp, ctx, p, g, step)
        if out is not None:
            return {"ParamOut": out}
    if optim_inplace.applies(xp, p, g):
        (out,) = optim_inplace.outputs(xp, ctx, p, ("ParamOut",))
        return {"ParamOut": optim_inplace.sgd(xp, ctx, p, g, step, out)}
    out = _param_out(xp, ctx, p, g)
    if out is None or out is p:  # (a lent Param: written before p is read)
        out = g * step  # one temporary, updated in place
    else:
        xp.multiply(g, step, out=out)
    out += p
    return {"ParamOut": out}


@kernel("momentum", context=True, sparse=SparseRule(rows_only=False),
        inplace=("ParamOut", "VelocityOut"), pure=True)
def momentum(xp, ins, attrs, want, ctx):
    """fluid 1.8 momentum_op.h (dense): v_out = v*mu + g; nesterov: p - (g + v_out*mu)*lr,
    otherwise p - lr*v_out.

    Dense semantics: a row not looked up keeps moving with its velocity, so a SelectedRows
    gradient is applied as its dense table (every row written, a table-sized gradient)."""
    p, g, v = ins["Param"], ins["Grad"], ins["Velocity"]
    lr = _scalar(ins["LearningRate"], p.dtype)
    mu = p.dtype.type(attrs["mu"])
    if optim_inplace.applies(xp, p, g, v):
        p_out, v_out = optim_inplace.outputs(xp, ctx, p, ("ParamOut", "VelocityOut"))
        optim_inplace.momentum(xp, ctx, p, g, v, lr, mu, attrs["use_nesterov"], p_out, v_out)
        return {"ParamOut": p_out, "VelocityOut": v_out}
    v_out = v * mu + g
    if attrs["use_nesterov"]:
        step = (g + v_out * mu) * lr
    else:
        step = lr * v_out
    out = _param_out(xp, ctx, p, step)
    if out is None:
        return {"ParamOut": p - step, "VelocityOut": v_out}
    xp.subtract(p, step, out=out)
    return {"ParamOut": out, "VelocityOut": v_out}


def _beta(ins, attrs, name, slot, dtype):
    """beta1/beta2: the optional Beta1Tensor/Beta2Tensor input wins over the attribute, as in
    fluid."""
    tensor = ins.get(slot)
    if tensor is not None:
        return _scalar(tensor, dtype)
    return dtype.type(attrs[name])


@kernel("adam", context=True, sparse=SparseRule(
    rows_only=lambda attrs: attrs["lazy_mode"],
    state=(("Param", "ParamOut"), ("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"))),
        inplace=("ParamOut", "Moment1Out", "Moment2Out"), pure=True)
def adam(xp, ins, attrs, want, ctx):
    """The dense update of fluid 1.8's adam_op.h (AdamFunctor), in its order of operations:

        lr_t = lr * sqrt(1 - beta2_pow) / (1 - beta1_pow)
        m1   = beta1 * m1 + (1 - beta1) * g
        m2   = beta2 * m2 + (1 - beta2) * g * g
        p    = p - lr_t * (m1 / (sqrt(m2) + epsilon))
        beta1_pow_out = beta1 * beta1_pow;  beta2_pow_out = beta2 * beta2_pow

    Fluid 1.8 (up to 1.8.5) adds the plain `epsilon`. Paddle 2.0-rc0 changed it to
    `epsilon * sqrt(1 - beta2_pow)` (Paddle PR #27778, "Adam formula differs from the paper");
    this kernel follows 1.8. The two differ by less than epsilon in the denominator, so only
    where sqrt(m2) is not much larger than epsilon. `lazy_mode` only matters for sparse
    (SelectedRows) gradients: with it only the looked-up rows (and their moments) change, in
    place where the plan lends the arrays (sparse_update.py), so a step costs its rows;
    without it Adam has dense semantics (every row's moments decay), and a SelectedRows
    gradient is applied as its dense table.
    """
    p, g = ins["Param"], ins["Grad"]
    m1, m2 = ins["Moment1"], ins["Moment2"]
    b1p_in, b2p_in = ins["Beta1Pow"], ins["Beta2Pow"]
    dt = p.dtype
    one = dt.type(1)
    beta1 = _beta(ins, attrs, "beta1", "Beta1Tensor", dt)
    beta2 = _beta(ins, attrs, "beta2", "Beta2Tensor", dt)
    eps = dt.type(attrs["epsilon"])
    b1p, b2p = _scalar(b1p_in, dt), _scalar(b2p_in, dt)
    lr_t = _scalar(ins["LearningRate"], dt) * (xp.sqrt(one - b2p) / (one - b1p))
    pows = {"Beta1PowOut": b1p_in * _as(beta1, b1p_in.dtype),
            "Beta2PowOut": b2p_in * _as(beta2, b2p_in.dtype)}
    if optim_inplace.applies(xp, p, g, m1, m2):
        p_out, m1_out, m2_out = optim_inplace.outputs(
            xp, ctx, p, ("ParamOut", "Moment1Out", "Moment2Out"))
        optim_inplace.adam(xp, ctx, p, g, m1, m2, lr_t, beta1, beta2, eps, p_out, m1_out,
                           m2_out)
        return {"ParamOut": p_out, "Moment1Out": m1_out, "Moment2Out": m2_out, **pows}
    m1_out = beta1 * m1 + (one - beta1) * g
    m2_out = beta2 * m2 + (one - beta2) * g * g
    step = lr_t * (m1_out / (xp.sqrt(m2_out) + eps))
    p_out = _param_out(xp, ctx, p, step)
    if p_out is None:
        p_out = p - step
    else:
        xp.subtract(p, step, out=p_out)
    return {"ParamOut": p_out, "Moment1Out": m1_out, "Moment2Out": m2_out, **pows}


def _as(value, dtype):
    """A numpy/cupy scalar or 0-d array in `dtype`."""
    return value.astype(dtype) if hasattr(value, "astype") else dtype.type(value)


@kernel("nadam")
def nadam(xp, ins, attrs, want):
    """Paddle 2.6+'s NAdamKernel (phi/kernels/impl/nadam_kernel_impl.h), in its order of
    operations, every state array shaped like the parameter and updated elementwise:

        decay_pow = decay_pow * 0.96;  beta2_pow = beta2_pow * beta2
        mu_t      = beta1 * (1 - 0.5 * decay_pow**psi)
        mu_next   = beta1 * (1 - 0.5 * decay_pow**psi * 0.96**psi)
        mu_prod   = mu_prod * mu_t
        m1 = beta1 * m1 + (1 - beta1) * g;  m2 = beta2 * m2 + (1 - beta2) * g * g
        m1_hat = mu_next * m1 / (1 - mu_prod * mu_next) + (1 - mu_t) * g / (1 - mu_prod)
        p = p - lr * m1_hat / (sqrt(m2 / (1 - beta2_pow)) + epsilon)

    with psi = momentum_decay; decay_pow, beta2_pow and mu_prod start at 1.
    """
    p, g = ins["param"], ins["grad"]
    dt = p.dtype
    one, half, rho = dt.type(1), dt.type(0.5), dt.type(0.96)
    beta1, beta2 = dt.type(attrs["beta1"]), dt.type(attrs["beta2"])
    eps, psi = dt.type(attrs["epsilon"]), dt.type(attrs["momentum_decay"])
    decay_pow = ins["momentum_decay_pow"] * rho
    beta2_pow = ins["beta2_pow"] * beta2
    decay = half * decay_pow ** psi
    mu_t = beta1 * (one - decay)
    mu_next = beta1 * (one - decay * rho ** psi)
    mu_prod = ins["mu_product"] * mu_t
    m1 = beta1 * ins["moment1"] + (one - beta1) * g
    m2 = beta2 * ins["moment2"] + (one - beta2) * g * g
    m1_hat = mu_next * m1 / (one - mu_prod * mu_next) + (one - mu_t) * g / (one - mu_prod)
    m2_hat = m2 / (one - beta2_pow)
    p_out = p - _scalar(ins["learning_rate"], dt) * m1_hat / (xp.sqrt(m2_hat) + eps)
    return {"param_out": p_out, "momentum_decay_pow_out": decay_pow, "beta2_pow_out": beta2_pow,
            "mu_product_out": mu_prod, "moment1_out": m1, "moment2_out": m2}


@kernel("sign")
def sign(xp, ins, attrs, want):
    return {"Out": xp.sign(ins["X"])}


@kernel("clip_by_norm", sparse=SparseValues())
def clip_by_norm(xp, ins, attrs, want):
    """fluid clip_by_norm_op: X * (max_norm / ||X||_2) when ||X||_2 > max_norm, else X.
    Dividing by max(norm, max_norm) gives both cases without a branch or a 0/0."""
    x = ins["X"]
    max_norm = x.dtype.type(attrs["max_norm"])
    norm = xp.sqrt(xp.sum(x * x))
    return {"Out": x * (max_norm / xp.maximum(norm, max_norm))}
