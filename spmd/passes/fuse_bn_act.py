"""BuildStrategy.fuse_bn_act_ops: a training batch_norm followed by relu becomes one
fused_batch_norm_act, and the pair's gradient ops one fused_batch_norm_act_grad, as fluid
1.8's fuse_bn_act_pass does (there for cuDNN only; here on every place, because on numpy the
fused kernels normalize, shift and clip one buffer in place: bench/fusion.py measures it).

Numbers are unchanged (spmd/kernels/fused.py). batch_norm's own output, before relu, is gone
from the compiled program (no op reads it: batch_norm's gradient reads X and the saved
statistics). Batch norms in test mode or with global statistics, and sync_batch_norm (this
pass runs after BuildStrategy.sync_batch_norm's), are left as they are.
"""
from __future__ import annotations

from ..core.operator import OpRole
from .common import make_op
from .fusion import DataFlow, drop_unused, lod_free, rewrite
from .registry import register_pass

_BN_STATE = ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace")


def _training_bn(op) -> bool:
    a = op.attrs
    return (op.type == "batch_norm" and op.role is OpRole.FORWARD and not a["is_test"]
            and not a["use_global_stats"] and not op.input("MomentumTensor"))


def _forward_match(flow: DataFlow, j: int, used: set) -> dict | None:
    relu = flow.op(j)
    if relu.type != "relu" or relu.role is not OpRole.FORWARD:
        return None
    y = relu.input("X")[0]
    i = flow.only_writer(y)
    if i is None or i >= j or i in used or not _training_bn(flow.op(i)):
        return None
    bn = flow.op(i)
    var = flow.block.vars.get(y)
    out = relu.output("Out")[0]
    if (var is None or var.persistable or not flow.read_only_by(y, {j})
            or y in bn.input_arg_names or not lod_free(flow.block, [bn.input("X")[0], y, out])
            or not flow.can_sink(i, j)):
        return None
    return {"first": i, "last": j, "bn": bn, "y": y, "out": out}


def _backward_match(flow: DataFlow, m: dict, grad_of: dict, used: set):
    dy = grad_of.get(m["y"])
    g1 = flow.only_writer(dy) if dy else None
    if g1 is None or g1 in used or len(flow.readers.get(dy, [])) != 1:
        return None
    g2 = flow.readers[dy][0]
    relu_grad, bn_grad = flow.op(g1), flow.op(g2)
    bn = m["bn"]
    if (g2 <= g1 or g2 in used or dy in flow.elsewhere or relu_grad.type != "relu_grad"
            or bn_grad.type != "batch_norm_grad" or relu_grad.input("Out") != [m["out"]]
            or relu_grad.output("X@GRAD") != [dy] or bn_grad.input("Y@GRAD") != [dy]
            or any(bn_grad.input(s) != bn.input(s) for s in ("X", "Scale"))
            or bn_grad.input("SavedMean") != bn.output("SavedMean")
            or bn_grad.input("SavedVariance") != bn.output("SavedVariance")
            or not relu_grad.input("Out@GRAD") or not flow.can_sink(g1, g2)):
        return None
    inputs = {"X": bn.input("X"), "Scale": bn.input("Scale"), "Bias": bn.input("Bias"),
              "Y": [m["out"]], "SavedMean": bn.output("SavedMean"),
              "SavedVariance": bn.output("SavedVariance"),
              "Y@GRAD": relu_grad.input("Out@GRAD")}
    outputs = {s: bn_grad.output(s) for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD")
               if bn_grad.output(s)}
    return g1, g2, inputs, outputs


def fuse_bn_act(program) -> int:
    """Rewrite `program` in place; returns how many batch_norm + relu pairs were fused."""
    flow = DataFlow(program)
    block = flow.block
    used: set[int] = set()
    placed, gone, fused = {}, [], 0
    for j in range(len(block.ops)):
        m = _forward_match(flow, j, used) if j not in used else None
        if m is None:
            continue
        used.update((m["first"], j))
        fused += 1
        bn = m["bn"]
        attrs = {"momentum": bn.attrs["momentum"], "epsilon": bn.attrs["epsilon"],
                 "data_layout": bn.attrs["data_layout"], "act_type": "relu"}
        outputs = {s: bn.output(s) for s in _BN_STATE if bn.output(s)}
        placed[j] = make_op(block, "fused_batch_norm_act",
                            {s: bn.input(s) for s in ("X", "Scale", "Bias", "Mean", "Variance")},
                            {"Y": [m["out"]], **outputs}, attrs, OpRole.FORWARD)
        gone.append(m["y"])
        grad = _backward_match(flow, m, program.grad_var_map, used)
        if grad is not None:
            g1, g2, inputs, outs = grad
            used.update((g1, g2))
            placed[g2] = make_op(block, "fused_batch_norm_act_grad", inputs, outs, attrs,
                                 OpRole.BACKWARD)
            gone.append(program.grad_var_map.get(m["y"]))
    rewrite(block, used - set(placed), placed)
    drop_unused(program, gone)
    return fused


# after sync_batch_norm (order 20), which it must not undo, before gradients are aggregated
@register_pass("fuse_bn_act", order=25, fields=("fuse_bn_act_ops",),
               one_place=True,
               when=lambda ctx: ctx.strategy.fuse_bn_act_ops)
def fuse_bn_act_pass(ctx) -> None:
    """BuildStrategy.fuse_bn_act_ops: fuse_bn_act."""
    fuse_bn_act(ctx.program)
