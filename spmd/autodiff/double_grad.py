"""Grad makers of grad ops: gradients of gradients (fluid 1.8's double-grad ops), for a
backward pass over a program that holds an earlier pass's grad ops (fluid.gradients of a
gradient, a gradient penalty, gradient_checker.double_grad_check).

A grad op computes first-order gradients (its outputs, X@GRAD) from forward values and the
gradients of the forward outputs (its inputs, Out@GRAD); its own grad maker reads the
gradients flowing into X@GRAD (fluid's DDX) and gives those of its inputs: of Out@GRAD
(fluid's DDOut) and of the forward values it read. Where the grad op is linear in what it
reads (conv, mul, elementwise mul/add/sub, reshapes, reductions, slice, pad) its gradient is
made of forward and grad ops that exist (fluid's conv2d_grad_grad is that composition too);
the rest have their own ops (spmd/ops/grad_grad.py).
"""
from __future__ import annotations

from ..core.unique_name import generate
from ..errors import UnimplementedError
from ..ops.registry import get_op_def


def _in(op, slot: str) -> str | None:
    names = op.inputs.get(slot) or []
    return names[0] if names else None


def _out(op, slot: str) -> str | None:
    names = op.outputs.get(slot) or []
    return names[0] if names else None


def _dd(op, ctx, slot: str) -> str | None:
    """The gradient flowing into the grad op's output `slot` (fluid's DDX), or None."""
    name = _out(op, slot)
    return ctx.out_grad(name) if name else None


def _g(op, ctx, slot: str) -> str | None:
    """A fresh name for a gradient contribution of the grad op's input `slot`, or None when
    that input needs none. Ask only when an op will write it."""
    name = _in(op, slot)
    return ctx.in_grad(name) if name else None


def _grad_outs(op, ctx, slots) -> dict[str, list[str]]:
    """The double-grad op's outputs: for each (its output slot, the grad op's input it is the
    gradient of), a fresh gradient name where that input needs one."""
    outs = {}
    for slot, of in slots:
        g = _g(op, ctx, of)
        if g is not None:
            outs[slot] = [g]
    return outs


def _temp(ctx, like: str) -> str:
    """A temporary of the backward pass, declared with `like`'s shape and dtype."""
    name = generate(f"{like}@DOUBLE_GRAD")
    ctx.grad_of[name] = like
    return name


def _attrs(type_: str, attrs: dict) -> dict:
    """The attributes of `attrs` that op `type_` takes (a grad op carries its forward's)."""
    known = get_op_def(type_).attrs
    return {k: v for k, v in attrs.items() if k in known}


def _zeros_like(ctx, specs: list, name: str) -> str:
    tmp = _temp(ctx, name)
    specs.append(("fill_zeros_like", {"X": [name]}, {"Out": [tmp]}, {}))
    return tmp


def _sum_into(ctx, specs: list, terms: list, target: str, like: str) -> None:
    """Specs writing the sum of `terms` (spec makers taking an output name) into `target`."""
    if len(terms) == 1:
        specs.append(terms[0](target))
        return
    parts = [_temp(ctx, like) for _ in terms]
    specs.extend(term(p) for term, p in zip(terms, parts))
    specs.append(("sum", {"X": parts}, {"Out": [target]}, {}))


# -- activations: their own double-grad ops --------------------------------------------------

def _masked_activation(type_: str, value_slot: str):
    """relu, leaky_relu: dX = dOut * mask(value), so DDOut = DDX * mask and the value gets
    no gradient (the mask is flat)."""
    def maker(op, ctx):
        ddx = _dd(op, ctx, "X@GRAD")
        if ddx is None:
            return []
        g = _g(op, ctx, "Out@GRAD")
        if g is None:
            return []
        ins = {value_slot: [_in(op, value_slot)], "DDX": [ddx]}
        return [(type_, ins, {"DDOut": [g]}, _attrs(type_, op.attrs))]
    return maker


def _x_activation(type_: str):
    """elu, square: dX = dOut * f'(X): DDOut = DDX * f'(X), X's gradient DDX * dOut * f''(X)."""
    def maker(op, ctx):
        ddx = _dd(op, ctx, "X@GRAD")
        if ddx is None:
            return []
        outs = _grad_outs(op, ctx, (("DX", "X"), ("DDOut", "Out@GRAD")))
        if not outs:
            return []
        ins = {"X": [_in(op, "X")], "DOut": [_in(op, "Out@GRAD")], "DDX": [ddx]}
        return [(type_, ins, outs, _attrs(type_, op.attrs))]
    return maker


def _sqrt_grad(op, ctx):
    ddx = _dd(op, ctx, "X@GRAD")
    if ddx is None:
        return []
    outs = _grad_outs(op, ctx, (("DOut", "Out"), ("DDOut", "Out@GRAD")))
    if not outs:
        return []
    ins = {"Out": [_in(op, "Out")], "DX": [_out(op, "X@GRAD")], "DDX": [ddx]}
    return [("sqrt_grad_grad", ins, outs, {})]


def _out_activation(kind: str):
    """tanh, sigmoid: dX = dOut * f'(Out) with f'(o) = 1 - o^2 (tanh) or o (1 - o) (sigmoid):
    DDOut is the grad op again on DDX, and Out's gradient dOut * DDX * f''(o), f'' = -2 o
    (tanh) or 1 - 2 o (sigmoid), from elementwise ops."""
    grad_type = kind + "_grad"
    slope, bias = (-2.0, 0.0) if kind == "tanh" else (-2.0, 1.0)

    def maker(op, ctx):
        ddx = _dd(op, ctx, "X@GRAD")
        if ddx is None:
            return []
        out, dout = _in(op, "Out"), _in(op, "Out@GRAD")
        specs: list = []
        g_dout = _g(op, ctx, "Out@GRAD")
        if g_dout is not None:
            specs.append((grad_type, {"Out": [out], "Out@GRAD": [ddx]}, {"X@GRAD": [g_dout]},
                          {}))
        g_out = _g(op, ctx, "Out")
        if g_out is not None:
            both, curve = _temp(ctx, dout), _temp(ctx, out)
            specs.append(("elementwise_mul", {"X": [dout], "Y": [ddx]}, {"Out": [both]}, {}))
            specs.append(("scale", {"X": [out]}, {"Out": [curve]},
                          {"scale": slope, "bias": bias}))
            specs.append(("elementwise_mul", {"X": [both], "Y": [curve]}, {"Out": [g_out]},
                          {}))
        return specs
    return maker


def _pool_grad(fwd: str):
    """pool2d / pool3d: average pooling is linear in X, so DDOut is the pooling of DDX. Max
    pooling's second gradient (DDX read at each window's maximum) has no op, in fluid 1.8 as
    here: refused, rather than a zero gradient that is not one."""
    again = _forward_again(fwd)

    def maker(op, ctx):
        if op.attrs.get("pooling_type") != "avg" and _dd(op, ctx, "X@GRAD") is not None:
            raise UnimplementedError(
                f"{op.type}: the gradient of max pooling's gradient is not implemented (fluid "
                f"1.8 has none either); a second backward pass through {fwd} needs "
                f"pool_type='avg', or keep the pooling out of the differentiated gradient")
        return again(op, ctx)
    return maker


# -- elementwise -----------------------------------------------------------------------------

def _elementwise_linear(type_: str):
    """add, sub: dX, dY are dOut (summed where broadcast): DDOut = DDX (+/-) DDY."""
    def maker(op, ctx):
        ddx, ddy = _dd(op, ctx, "X@GRAD"), _dd(op, ctx, "Y@GRAD")
        if ddx is None and ddy is None:
            return []
        g = _g(op, ctx, "Out@GRAD")
        if g is None:
            return []
        specs: list = []
        a = ddx if ddx is not None else _zeros_like(ctx, specs, _in(op, "X"))
        b = ddy if ddy is not None else _zeros_like(ctx, specs, _in(op, "Y"))
        specs.append((type_, {"X": [a], "Y": [b]}, {"Out": [g]}, _attrs(type_, op.attrs)))
        return specs
    return maker


def _bilinear(fwd: str, slots: tuple, out_slot: str):
    """mul, elementwise_mul, conv: Out = B(X, W), bilinear, and the grad op gives
    dX = B_x^T dOut, dW = B_w^T dOut. Then DDOut = B(DDX, W) + B(X, DDW), X's gradient is
    B_x^T dOut with W replaced by DDW and W's is B_w^T dOut with X replaced by DDX: the
    forward op and the grad op again, on other inputs."""
    xs, ws = slots
    grad_type = fwd + "_grad"

    def maker(op, ctx):
        x, w, dout = _in(op, xs), _in(op, ws), _in(op, out_slot + "@GRAD")
        ddx, ddw = _dd(op, ctx, xs + "@GRAD"), _dd(op, ctx, ws + "@GRAD")
        if ddx is None and ddw is None:
            return []
        fa, ga = _attrs(fwd, op.attrs), _attrs(grad_type, op.attrs)
        specs: list = []
        g_out = _g(op, ctx, out_slot + "@GRAD")
        if g_out is not None:
            terms = []
            if ddx is not None:
                terms.append(lambda o: (fwd, {xs: [ddx], ws: [w]}, {out_slot: [o]}, fa))
            if ddw is not None:
                terms.append(lambda o: (fwd, {xs: [x], ws: [ddw]}, {out_slot: [o]}, fa))
            _sum_into(ctx, specs, terms, g_out, dout)
        if ddw is not None:
            g_x = _g(op, ctx, xs)
            if g_x is not None:
                specs.append((grad_type, {xs: [x], ws: [ddw], out_slot + "@GRAD": [dout]},
                              {xs + "@GRAD": [g_x]}, ga))
        if ddx is not None:
            g_w = _g(op, ctx, ws)
            if g_w is not None:
                specs.append((grad_type, {xs: [ddx], ws: [w], out_slot + "@GRAD": [dout]},
                              {ws + "@GRAD": [g_w]}, ga))
        return specs
    return maker


def _elementwise_div_grad(op, ctx):
    ddx, ddy = _dd(op, ctx, "X@GRAD"), _dd(op, ctx, "Y@GRAD")
    if ddx is None and ddy is None:
        return []
    wanted = [("Y@GRAD", "Y"), ("DDOut", "Out@GRAD")]
    if ddy is not None:  # Out's gradient comes from DDY alone
        wanted.insert(1, ("Out@GRAD", "Out"))
    outs = _grad_outs(op, ctx, wanted)
    if not outs:
        return []
    ins = {"Y": [_in(op, "Y")], "Out": [_in(op, "Out")], "DOut": [_in(op, "Out@GRAD")]}
    if ddx is not None:
        ins["DDX"] = [ddx]
    if ddy is not None:
        ins["DDY"] = [ddy]
    return [("elementwise_div_grad_grad", ins, outs, _attrs("elementwise_div", op.attrs))]


# -- ops whose gradient is linear in dOut alone: DDOut is the forward op applied to DDX -----

def _forward_again(fwd: str, extra_inputs=(), extra_outputs=()):
    """dX = L^T dOut for a linear forward L (mean, reductions, slice, pad, transpose): then
    DDOut = L(DDX), the forward op on DDX (with the grad op's extra inputs, the slice's
    tensors; its extra outputs, transpose2's XShape, go to temporaries)."""
    in_slot = "Input" if fwd == "slice" else "X"

    def maker(op, ctx):
        ddx = _dd(op, ctx, in_slot + "@GRAD")
        if ddx is None:
            return []
        g = _g(op, ctx, "Out@GRAD")
        if g is None:
            return []
        ins = {in_slot: [ddx]}
        for slot in extra_inputs:
            if op.inputs.get(slot):
                ins[slot] = list(op.inputs[slot])
        outs = {"Out": [g]}
        for slot in extra_outputs:
            outs[slot] = [_temp(ctx, _in(op, slot))]
        return [(fwd, ins, outs, _attrs(fwd, op.attrs))]
    return maker


def _again_on_ddx(op, ctx):
    """A grad op linear in dOut whose other inputs carry no gradient (dropout's mask): DDOut
    is the same grad op with dOut replaced by DDX."""
    ddx = _dd(op, ctx, "X@GRAD")
    if ddx is None:
        return []
    g = _g(op, ctx, "Out@GRAD")
    if g is None:
        return []
    ins = {slot: list(names) for slot, names in op.inputs.items()}
    ins["Out@GRAD"] = [ddx]
    return [(op.type, ins, {"X@GRAD": [g]}, _attrs(op.type, op.attrs))]


def _concat_grad(op, ctx):
    """concat: dX_i are dOut's pieces, so DDOut is the concatenation of the DDX_i (zeros
    where none flows)."""
    dds = [ctx.out_grad(n) for n in op.outputs.get("X@GRAD") or []]
    if all(d is None for d in dds):
        return []
    g = _g(op, ctx, "Out@GRAD")
    if g is None:
        return []
    specs: list = []
    parts = [d if d is not None else _zeros_like(ctx, specs, x)
             for d, x in zip(dds, op.input("X"))]
    ins = {"X": parts}
    if op.inputs.get("AxisTensor"):
        ins["AxisTensor"] = list(op.inputs["AxisTensor"])
    specs.append(("concat", ins, {"Out": [g]}, _attrs("concat", op.attrs)))
    return specs


def _reshape_grad(op, ctx):
    """reshape2, squeeze2, unsqueeze2, flatten2: dX is dOut reshaped, so DDOut is DDX
    reshaped to dOut's shape."""
    ddx = _dd(op, ctx, "X@GRAD")
    if ddx is None:
        return []
    g = _g(op, ctx, "Out@GRAD")
    if g is None:
        return []
    return [("reshape2_grad_grad", {"DOut": [_in(op, "Out@GRAD")], "DDX": [ddx]},
             {"DDOut": [g]}, {})]


def _norm_grad(type_: str, running_stats: bool):
    """instance_norm's and batch_norm's grad ops: their own double-grad ops."""
    def maker(op, ctx):
        return _normalization_grad(op, ctx, type_, running_stats)
    return maker


def _normalization_grad(op, ctx, type_, running_stats):
    dd = {s: _dd(op, ctx, s + "@GRAD") for s in ("X", "Scale", "Bias")}
    if all(v is None for v in dd.values()):
        return []
    outs = _grad_outs(op, ctx, (("DX", "X"), ("DScale", "Scale"), ("DDY", "Y@GRAD")))
    if not outs:
        return []
    ins = {"X": [_in(op, "X")], "DY": [_in(op, "Y@GRAD")]}
    slots = ("Scale", "Mean", "Variance") if running_stats else ("Scale",)
    for slot in slots:
        if _in(op, slot):
            ins[slot] = [_in(op, slot)]
    for slot, name in (("DDX", dd["X"]), ("DDScale", dd["Scale"]), ("DDBias", dd["Bias"])):
        if name is not None:
            ins[slot] = [name]
    return [(type_, ins, outs, _attrs(type_, op.attrs))]


_SLICE_TENSORS = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")

# grad op type -> its grad maker (looked up by backward._grad_maker)
GRAD_OP_GRAD_MAKERS: dict = {
    "relu_grad": _masked_activation("relu_grad_grad", "Out"),
    "leaky_relu_grad": _masked_activation("leaky_relu_grad_grad", "X"),
    "elu_grad": _x_activation("elu_grad_grad"),
    "square_grad": _x_activation("square_grad_grad"),
    "sqrt_grad": _sqrt_grad,
    "tanh_grad": _out_activation("tanh"),
    "sigmoid_grad": _out_activation("sigmoid"),
    "matmul_grad": _bilinear("matmul", ("X", "Y"), "Out"),
    "pool2d_grad": _pool_grad("pool2d"),
    "pool3d_grad": _pool_grad("pool3d"),
    "elementwise_add_grad": _elementwise_linear("elementwise_add"),
    "elementwise_sub_grad": _elementwise_linear("elementwise_sub"),
    "elementwise_mul_grad": _bilinear("elementwise_mul", ("X", "Y"), "Out"),
    "elementwise_div_grad": _elementwise_div_grad,
    "mul_grad": _bilinear("mul", ("X", "Y"), "Out"),
    "conv2d_grad": _bilinear("conv2d", ("Input", "Filter"), "Output"),
    "depthwise_conv2d_grad": _bilinear("depthwise_conv2d", ("Input", "Filter"), "Output"),
    "conv3d_grad": _bilinear("conv3d", ("Input", "Filter"), "Output"),
    "mean_grad": _forward_again("mean"),
    "reduce_mean_grad": _forward_again("reduce_mean"),
    "reduce_sum_grad": _forward_again("reduce_sum"),
    "pad_grad": _forward_again("pad"),
    "slice_grad": _forward_again("slice", extra_inputs=_SLICE_TENSORS),
    "transpose2_grad": _forward_again("transpose2", extra_outputs=("XShape",)),
    "dropout_grad": _again_on_ddx,
    "concat_grad": _concat_grad,
    "reshape2_grad": _reshape_grad,
    "squeeze2_grad": _reshape_grad,
    "unsqueeze2_grad": _reshape_grad,
    "flatten2_grad": _reshape_grad,
    "instance_norm_grad": _norm_grad("instance_norm_grad_grad", False),
    "batch_norm_grad": _norm_grad("batch_norm_grad_grad", True),
}
