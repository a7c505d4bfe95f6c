"""BuildStrategy.fuse_elewise_add_act_ops: elementwise_add + activation (relu, sigmoid, tanh,
or scale with no bias) becomes one fused_elemwise_activation, and the pair's gradient ops one
fused_elemwise_activation_grad, as fluid 1.8's fuse_elewise_add_act_pass does. Two patterns:

- act(X + Y) (functor_list [act, "elementwise_add"]: fc's bias add and activation), and
- X + act(Y) (["elementwise_add", act]: a residual add of an activated branch).

Numbers are unchanged (spmd/kernels/fused.py). Each fused pair's intermediate value (X + Y, or
act(Y)) is kept as IntermediateOut only when some other op reads it (X + act(Y)'s gradient
does); otherwise it is gone from the compiled program, and so cannot be fetched: on numpy
that is what the fusion saves (the activation runs in place on the sum).
"""
from __future__ import annotations

from ..core.operator import OpRole
from ..ops.fused import ADD, FUSABLE_ACTS
from .common import make_op
from .fusion import DataFlow, drop_unused, lod_free, rewrite
from .registry import register_pass


def _fusable_act(op) -> bool:
    if op.type not in FUSABLE_ACTS:
        return False
    if op.type == "scale":  # fluid's scale functor multiplies only
        return (op.attrs["bias"] == 0.0 and op.attrs["bias_after_scale"]
                and not op.input("ScaleTensor"))
    return True


def _act_grad_io(op, act: str, scale: float):
    """(output of the activation read, its gradient read, the input gradient written) of a
    gradient op of `act`, or None when `op` is not one."""
    if act == "scale":
        if (op.type != "scale" or op.input("ScaleTensor") or op.attrs["scale"] != scale
                or op.attrs["bias"] != 0.0):
            return None
        return None, op.input("X"), op.output("Out")
    if op.type != act + "_grad":
        return None
    return op.input("Out"), op.input("Out@GRAD"), op.output("X@GRAD")


def _forward_match(flow: DataFlow, j: int, used: set) -> dict | None:
    """The fusion ending at forward op j (the pair's second op), or None."""
    block, second = flow.block, flow.op(j)
    if second.role is not OpRole.FORWARD:
        return None
    if _fusable_act(second):  # act(X + Y)
        outside, inner = True, second.input("X")[0]
    elif second.type == ADD:  # X + act(Y)
        outside, inner = False, second.input("Y")[0]
    else:
        return None
    i = flow.only_writer(inner)
    if i is None or i >= j or i in used:
        return None
    first = flow.op(i)
    if first.role is not OpRole.FORWARD or not (
            first.type == ADD if outside else _fusable_act(first)):
        return None
    add, act = (first, second) if outside else (second, first)
    x = add.input("X")[0]
    y = add.input("Y")[0] if outside else act.input("X")[0]
    out = second.output("Out")[0]
    var = block.vars.get(inner)
    if (var is None or var.persistable or var.is_data or x == inner
            or inner in first.input_arg_names
            or not lod_free(block, [x, y, inner, out]) or not flow.can_sink(i, j)):
        return None
    keep = not flow.read_only_by(inner, {j})
    attrs = {"functor_list": [act.type, ADD] if outside else [ADD, act.type],
             "axis": add.attrs["axis"], "save_intermediate_out": keep,
             "scale": act.attrs["scale"] if act.type == "scale" else 0.0}
    return {"first": i, "last": j, "act": act.type, "outside": outside, "x": x, "y": y,
            "inner": inner, "out": out, "keep": keep, "attrs": attrs}


def _backward_match(flow: DataFlow, m: dict, grad_of: dict, used: set):
    """(first, last, inputs, outputs) of the fused gradient of forward fusion m, or None."""
    dinner = grad_of.get(m["inner"])
    g1 = flow.only_writer(dinner) if dinner else None
    if g1 is None or g1 in used or len(flow.readers.get(dinner, [])) != 1:
        return None
    g2 = flow.readers[dinner][0]
    if g2 <= g1 or g2 in used or dinner in flow.elsewhere:
        return None
    op1, op2 = flow.op(g1), flow.op(g2)
    if op1.role is not OpRole.BACKWARD or op2.role is not OpRole.BACKWARD:
        return None
    act_op, add_op = (op1, op2) if m["outside"] else (op2, op1)
    io = _act_grad_io(act_op, m["act"], m["attrs"]["scale"])
    if io is None or add_op.type != ADD + "_grad" or add_op.attrs["axis"] != m["attrs"]["axis"]:
        return None
    act_out, act_dout, act_dx = io
    if m["outside"]:
        ok = (act_out in (None, [m["out"]]) and act_dx == [dinner]
              and add_op.input("X") == [m["x"]] and add_op.input("Y") == [m["y"]]
              and add_op.input("Out@GRAD") == [dinner])
        dout, outputs = act_dout, {s: add_op.output(s) for s in ("X@GRAD", "Y@GRAD")}
    else:
        ok = (act_out in (None, [m["inner"]]) and act_dout == [dinner]
              and add_op.input("X") == [m["x"]] and add_op.input("Y") == [m["inner"]]
              and add_op.output("Y@GRAD") == [dinner])
        dout, outputs = add_op.input("Out@GRAD"), {"X@GRAD": add_op.output("X@GRAD"),
                                                   "Y@GRAD": act_dx}
    if not ok or not dout or not flow.can_sink(g1, g2):
        return None
    inputs = {"X": [m["x"]], "Y": [m["y"]], "Out": [m["out"]], "Out@GRAD": dout}
    if m["keep"]:
        inputs["IntermediateOut"] = [m["inner"]]
    return g1, g2, inputs, {s: n for s, n in outputs.items() if n}


def fuse_elewise_add_act(program) -> int:
    """Rewrite `program` in place; returns how many add + activation pairs were fused."""
    flow = DataFlow(program)
    block = flow.block
    used: set[int] = set()
    matches = []
    for j in range(len(block.ops)):
        if j not in used:
            m = _forward_match(flow, j, used)
            if m is not None:
                matches.append(m)
                used.update((m["first"], m["last"]))
    placed, gone = {}, []
    for m in matches:
        outputs = {"Out": [m["out"]]}
        if m["keep"]:
            outputs["IntermediateOut"] = [m["inner"]]
        placed[m["last"]] = make_op(block, "fused_elemwise_activation",
                                    {"X": [m["x"]], "Y": [m["y"]]}, outputs, m["attrs"],
                                    OpRole.FORWARD)
        grad = _backward_match(flow, m, program.grad_var_map, used)
        if grad is not None:
            g1, g2, inputs, outs = grad
            used.update((g1, g2))
            placed[g2] = make_op(block, "fused_elemwise_activation_grad", inputs, outs,
                                 m["attrs"], OpRole.BACKWARD)
            gone.append(program.grad_var_map.get(m["inner"]))
        if not m["keep"]:
            gone.append(m["inner"])
    rewrite(block, used - set(placed), placed)
    drop_unused(program, gone)
    return len(matches)


# after the op rewrites of order 20 (sync_batch_norm), before the gradients are aggregated
@register_pass("fuse_elewise_add_act", order=25, fields=("fuse_elewise_add_act_ops",),
               one_place=True,
               when=lambda ctx: ctx.strategy.fuse_elewise_add_act_ops)
def fuse_elewise_add_act_pass(ctx) -> None:
    """BuildStrategy.fuse_elewise_add_act_ops: fuse_elewise_add_act."""
    fuse_elewise_add_act(ctx.program)
