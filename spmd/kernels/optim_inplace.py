"""The dense sgd / momentum / adam updates on numpy, in chunks, into given output arrays.

Each element goes through the operations of the plain expressions in optim.py, in their order
and dtype (numpy's ufuncs round each operation alike with or without `out=`, and an `a * b`
is `b * a` bit for bit), so the results are bitwise those of the plain kernels. What differs
is memory: the plain expressions make about one temporary the size of the parameter per
operation; here the outputs are written once, a chunk at a time, through two scratch buffers
of CHUNK elements kept in the op's KernelContext. An output may be the very array of its
input (the plan lends Param's buffer for ParamOut when nothing else holds it,
KernelContext.lent): every chunk reads its input elements before it writes the same ones.
sgd over its own Param needs no chunks when the plan hands it the gradient, which dies there
(KernelContext.spent): the product is written into the gradient, then the sum into Param.

`outputs(xp, ctx, like, slots)` gives the arrays to write into: those the plan offers
(KernelContext.out) where they fit, fresh ones otherwise; None when this path does not apply
(not numpy, mixed dtypes, arrays that are not C-contiguous), and the kernel then runs its
plain expressions.
"""
from __future__ import annotations

CHUNK = 1 << 15  # elements per chunk: 128 KiB of float32, so the scratch stays in cache


def applies(xp, p, *others) -> bool:
    """Whether the chunked path runs: numpy arrays of p's dtype, C-contiguous, p's shape."""
    if xp.__name__ != "numpy" or not isinstance(p, xp.ndarray) or not p.flags.c_contiguous:
        return False
    return all(isinstance(o, xp.ndarray) and o.dtype == p.dtype and o.shape == p.shape
               and o.flags.c_contiguous for o in others)


def outputs(xp, ctx, p, slots) -> list:
    """One flat array per output slot: the array the plan offers for it (p's shape and dtype,
    C-contiguous, writable) or a new one."""
    arrays = []
    for slot in slots:
        out = ctx.out(xp, slot) if ctx is not None else None
        if (out is None or not isinstance(out, xp.ndarray) or out.shape != p.shape
                or out.dtype != p.dtype or not out.flags.c_contiguous
                or not out.flags.writeable):
            out = xp.empty(p.shape, dtype=p.dtype)
        arrays.append(out)
    return arrays


def _scratch(xp, ctx, dtype, n: int):
    """Two buffers of min(n, CHUNK) elements of `dtype`, kept by the op from run to run."""
    size = min(n, CHUNK)
    key = ("chunk", dtype.str)
    bufs = ctx.scratch.get(key) if ctx is not None else None
    if bufs is None or bufs[0].size < size:
        bufs = (xp.empty(size, dtype=dtype), xp.empty(size, dtype=dtype))
        if ctx is not None:
            ctx.scratch[key] = bufs
    return bufs


def _pieces(n: int, *flat):
    """Per chunk, the chunk of each of the flat arrays `flat` (the scratch buffers among them
    cut to the chunk's length); one piece of whole arrays when n fits in one chunk."""
    if n <= CHUNK:
        return (tuple(f[:n] if f.size != n else f for f in flat),)
    return (tuple(f[a:min(a + CHUNK, n)] if f.size == n else f[:min(CHUNK, n - a)]
                  for f in flat) for a in range(0, n, CHUNK))


def sgd(xp, ctx, p, g, step, out):
    """out = g * step + p (step: minus the learning rate)."""
    if out is not p:  # out is not read: it holds the product, then the sum
        xp.multiply(g, step, out=out)
        return xp.add(out, p, out=out)
    n = p.size
    t, _ = _scratch(xp, ctx, p.dtype, n)
    for pc, gc, oc, tc in _pieces(n, p.reshape(-1), g.reshape(-1), out.reshape(-1), t):
        xp.multiply(gc, step, out=tc)
        xp.add(tc, pc, out=oc)
    return out


def sgd_fast(xp, ctx, p, g, step):
    """sgd's update where the plan gives it a place to write, without the general path's
    checks, or None where it does not apply: over Param's own buffer (lent) when the plan also
    hands it the gradient, which dies at the op (KernelContext.spent), the gradient holding the
    product; into the array the plan offers for ParamOut (Reduce mode's place in the step's
    all-gather buffer), which holds the product, then the sum. Two whole-array operations,
    those of sgd() below, in its order."""
    if g.shape != p.shape or g.dtype != p.dtype:
        return None
    lent = ctx.lent
    if lent is not None and lent.get("ParamOut") is p:
        spent = ctx.spent_inputs
        if spent is None or spent.get("Grad") is not g:
            return None  # the chunks (sgd below) then spare a temporary of p's size
        xp.multiply(g, step, out=g)
        return xp.add(g, p, out=p)
    make = ctx.outputs.get("ParamOut")
    if make is None:
        return None
    out = make(xp)
    if (type(out) is not xp.ndarray or out.shape != p.shape or out.dtype != p.dtype
            or not out.flags.writeable or out is p or out is g):
        return None
    xp.multiply(g, step, out=out)
    return xp.add(out, p, out=out)


def momentum(xp, ctx, p, g, v, lr, mu, nesterov: bool, p_out, v_out):
    """v_out = v*mu + g; p_out = p - (g + v_out*mu)*lr (nesterov) or p - lr*v_out."""
    n = p.size
    t, _ = _scratch(xp, ctx, p.dtype, n)
    flat = (p.reshape(-1), g.reshape(-1), v.reshape(-1), p_out.reshape(-1), v_out.reshape(-1))
    for pc, gc, vi, po, vc, tc in _pieces(n, *flat, t):
        xp.multiply(vi, mu, out=vc)
        xp.add(vc, gc, out=vc)
        if nesterov:
            xp.multiply(vc, mu, out=tc)
            xp.add(gc, tc, out=tc)
            xp.multiply(tc, lr, out=tc)
        else:
            xp.multiply(lr, vc, out=tc)
        xp.subtract(pc, tc, out=po)
    return p_out, v_out


def adam(xp, ctx, p, g, m1, m2, lr_t, beta1, beta2, eps, p_out, m1_out, m2_out):
    """fluid 1.8's dense Adam (optim.adam's docstring), a chunk at a time:
    m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + ((1-beta2)*g)*g;
    p = p - lr_t*(m1 / (sqrt(m2) + eps))."""
    one = p.dtype.type(1)
    c1, c2 = one - beta1, one - beta2
    n = p.size
    t, u = _scratch(xp, ctx, p.dtype, n)
    flat = (p.reshape(-1), g.reshape(-1), m1.reshape(-1), m2.reshape(-1), p_out.reshape(-1),
            m1_out.reshape(-1), m2_out.reshape(-1))
    mul, add = xp.multiply, xp.add
    for pc, gc, a1, a2, po, m1c, m2c, tc, uc in _pieces(n, *flat, t, u):
        mul(c1, gc, out=tc)
        mul(beta1, a1, out=m1c)
        add(m1c, tc, out=m1c)
        mul(c2, gc, out=uc)
        mul(uc, gc, out=uc)
        mul(beta2, a2, out=m2c)
        add(m2c, uc, out=m2c)
        xp.sqrt(m2c, out=tc)
        add(tc, eps, out=tc)
        xp.divide(m1c, tc, out=tc)
        mul(lr_t, tc, out=tc)
        xp.subtract(pc, tc, out=po)
    return p_out, m1_out, m2_out
