"""One declarative harness for every op: forward against a numpy reference, gradients against
central finite differences in float64, and float32 within tolerance.

    CASES = [OpCase("relu", {"X": rand(3, 4)}, ref=lambda X: {"Out": np.maximum(X, 0)})]

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_relu(case):
        check_op(case)

The op is built into a fresh Program through the public IR (Block.append_op), run by the
Executor, and differentiated by spmd.autodiff.gradients, so definitions, shape inference, grad
makers and kernels are all exercised.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import spmd
from spmd.autodiff import gradients
from spmd.core import CPUPlace, Program, Scope
from spmd.ops import get_op_def

RNG = np.random.default_rng(20261121)


def rand(*shape, low=-1.0, high=1.0):
    """float64 uniform values in [low, high)."""
    return RNG.uniform(low, high, size=shape)


def rand_away_from(*shape, points=(0.0,), gap=0.1, low=-1.0, high=1.0):
    """Uniform values at least `gap` away from each kink in `points` (relu's 0, clip's bounds),
    so finite differences never straddle one."""
    x = rand(*shape, low=low, high=high)
    for p in points:
        near = np.abs(x - p) < gap
        x[near] = p + np.where(x[near] >= p, gap, -gap) * 1.5
    return x


@dataclass
class OpCase:
    op: str
    inputs: dict  # slot -> array, or list of arrays for duplicable slots
    ref: Callable | None  # ref(**inputs, **attrs) -> {output slot: array or list}
    attrs: dict = field(default_factory=dict)
    outputs: dict | None = None  # slot -> number of vars; default: the keys of ref's result
    grad: list | None = None  # input slots to differentiate; default: float, differentiable
    grad_outputs: list | None = None  # outputs the check loss uses; default: float, diff.
    name: str = ""
    rtol: float = 1e-6
    atol: float = 1e-8
    fp32_rtol: float = 1e-4
    fp32_atol: float = 1e-5
    check_fp32: bool = True
    # LoD: input slot -> recursive sequence lengths ([[2, 3]]) fed with it; the reference then
    # gets them as `lod=`. out_lod: output slot -> the lengths its result must carry
    lod: dict = field(default_factory=dict)
    out_lod: dict = field(default_factory=dict)

    def __str__(self):
        return self.name or self.op


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _cast(a, dtype):
    a = np.asarray(a)
    return a.astype(dtype) if a.dtype.kind == "f" else a


def _reference(case: OpCase):
    extra = {"lod": case.lod} if case.lod else {}
    return case.ref(**{k: v for k, v in case.inputs.items()}, **case.attrs, **extra)


def _fed(case: OpCase, feed: dict) -> dict:
    """`feed` with the LoD inputs wrapped as LoDTensors carrying their case's LoD."""
    out = dict(feed)
    for slot, lengths in case.lod.items():
        name = f"{slot}_0"
        if name in out:
            out[name] = spmd.fluid.create_lod_tensor(out[name], lengths, CPUPlace())
    return out


def _output_counts(case: OpCase):
    if case.outputs is not None:
        return dict(case.outputs)
    return {slot: len(_as_list(v)) if isinstance(v, (list, tuple)) else 1
            for slot, v in _reference(case).items()}


def build(case: OpCase, dtype: str, stop_gradient=True):
    """A program holding the op; returns (program, feed, input vars by slot, output vars)."""
    opdef = get_op_def(case.op)
    prog = Program()
    block = prog.global_block()
    feed, in_vars = {}, {}
    for slot, value in case.inputs.items():
        dup = opdef.input_slots[slot].duplicable
        arrays = [_cast(a, dtype) for a in (_as_list(value) if dup else [value])]
        vs = []
        for i, a in enumerate(arrays):
            name = f"{slot}_{i}"
            vs.append(block.create_var(name=name, shape=a.shape, dtype=a.dtype.name, is_data=True,
                                       stop_gradient=stop_gradient or a.dtype.kind != "f",
                                       lod_level=len(case.lod.get(slot, ()))))
            feed[name] = a
        in_vars[slot] = vs if dup else vs[0]
    out_vars = {slot: [block.create_var(name=f"out_{slot}_{i}") for i in range(n)]
                for slot, n in _output_counts(case).items()}
    block.append_op(case.op, in_vars, {s: v for s, v in out_vars.items()}, case.attrs)
    return prog, feed, in_vars, out_vars


def run_forward(case: OpCase, dtype="float64", place=None, with_lod=False):
    """Run the op once; returns {output slot: list of arrays} (with_lod: of LoDTensors)."""
    prog, feed, _, out_vars = build(case, dtype)
    names = [(s, v.name) for s, vs in out_vars.items() for v in vs]
    got = spmd.Executor(place or CPUPlace()).run(prog, feed=_fed(case, feed),
                                                 fetch_list=[n for _, n in names],
                                                 scope=Scope(), return_numpy=not with_lod)
    res: dict = {}
    for (slot, _), a in zip(names, got):
        res.setdefault(slot, []).append(a)
    return res


def check_forward(case: OpCase, dtype="float64", place=None, rtol=None, atol=None):
    want = _reference(case)
    got = run_forward(case, dtype, place, with_lod=True)
    for slot, lengths in case.out_lod.items():
        assert got[slot][0].recursive_sequence_lengths() == lengths, \
            f"{case} {slot}: LoD {got[slot][0].recursive_sequence_lengths()} != {lengths}"
    for slot, ref in want.items():
        for i, (g, r) in enumerate(zip(got[slot], _as_list(ref))):
            g = np.array(g)
            r = np.asarray(r)
            assert g.shape == r.shape, f"{case} {slot}[{i}]: shape {g.shape} != reference {r.shape}"
            if r.dtype.kind == "f":
                assert g.dtype == np.dtype(dtype), f"{case} {slot}[{i}]: dtype {g.dtype} != {dtype}"
            np.testing.assert_allclose(g, r, rtol=rtol or case.rtol, atol=atol or case.atol,
                                       err_msg=f"{case} output {slot}[{i}] ({dtype})")


def _differentiable(case: OpCase):
    opdef = get_op_def(case.op)
    grad_in = case.grad
    if grad_in is None:
        grad_in = [s for s, v in case.inputs.items() if s not in opdef.no_grad_inputs
                   and np.asarray(_as_list(v)[0]).dtype.kind == "f"]
    grad_out = case.grad_outputs
    if grad_out is None:
        ref = _reference(case)
        grad_out = [s for s in _output_counts(case) if s not in opdef.nondiff_outputs
                    and np.asarray(_as_list(ref[s])[0]).dtype.kind == "f"]
    return grad_in, grad_out


def check_grad(case: OpCase, place=None, eps=1e-6):
    """Analytic gradients (autodiff + grad kernels) against central differences, float64, of
    loss = sum over checked outputs of sum(out * G) with fixed random weights G."""
    grad_in, grad_out = _differentiable(case)
    if not grad_in:
        return
    prog, feed, in_vars, out_vars = build(case, "float64", stop_gradient=False)
    block = prog.global_block()
    targets, weights = [], []
    ref = _reference(case)
    for slot in grad_out:
        for i, v in enumerate(out_vars[slot]):
            shape = np.asarray(_as_list(ref[slot])[i]).shape
            g = block.create_var(name=f"G_{slot}_{i}", shape=shape, dtype="float64", is_data=True)
            feed[g.name] = RNG.uniform(0.5, 1.5, size=shape)
            targets.append(v)
            weights.append(g)
    xs = [v for s in grad_in for v in _as_list(in_vars[s])]
    grads = gradients(targets, xs, target_gradients=weights)
    exe = spmd.Executor(place or CPUPlace())
    fetch = [g.name for g in grads if g is not None]
    analytic = dict(zip(fetch, exe.run(prog, feed=_fed(case, feed), fetch_list=fetch,
                                       scope=Scope())))

    fwd_prog, _, _, fwd_outs = build(case, "float64")
    out_names = [v.name for s in grad_out for v in fwd_outs[s]]
    w = [feed[g.name] for g in weights]

    def loss(f):
        outs = exe.run(fwd_prog, feed=_fed(case, f), fetch_list=out_names, scope=Scope())
        return sum(float(np.sum(o * wi)) for o, wi in zip(outs, w))

    for x, g in zip(xs, grads):
        assert g is not None, f"{case}: no gradient reached input {x.name}"
        base = {k: v for k, v in feed.items() if not k.startswith("G_")}
        numeric = np.zeros_like(base[x.name])
        flat = numeric.reshape(-1)
        for j in range(flat.size):
            plus, minus = dict(base), dict(base)
            arr = base[x.name].reshape(-1)
            p, m = arr.copy(), arr.copy()
            p[j] += eps
            m[j] -= eps
            plus[x.name], minus[x.name] = p.reshape(numeric.shape), m.reshape(numeric.shape)
            flat[j] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(analytic[g.name], numeric, rtol=case.rtol * 100,
                                   atol=max(case.atol * 100, 1e-7),
                                   err_msg=f"{case}: d loss / d {x.name}")


def check_op(case: OpCase, place=None):
    """Forward in float64 and float32 against the reference, then gradients in float64."""
    check_forward(case, "float64", place)
    if case.check_fp32:
        check_forward(case, "float32", place, rtol=case.fp32_rtol, atol=case.fp32_atol)
    check_grad(case, place)
