"""Op definitions: the double-grad ops, gradients of grad ops (fluid 1.8's relu_grad_grad,
leaky_relu_grad_grad, elu_grad_grad, sqrt_grad_grad, square_grad_grad, reshape2_grad_grad,
elementwise_div_grad_grad, instance_norm_grad_grad, batch_norm_grad_grad), made by
spmd/autodiff/double_grad.py.

Slots follow fluid's: `DDX` is the gradient flowing into the grad op's output X@GRAD, `DDOut`
the one it gives to its input Out@GRAD, `DX` / `DOut` the first-order gradients it reads or
(as outputs) the gradients it gives to X / Out. Double-grad ops are not differentiated again.
"""
from __future__ import annotations

from .registry import define_op


def _like(*pairs):
    """Shape inference: each output slot shaped like an input slot."""
    def infer(ctx):
        for out, like in pairs:
            ctx.set_output_like(out, like)
    return infer


define_op("relu_grad_grad", inputs=["Out", "DDX"], outputs=["DDOut"], grad=None)(
    _like(("DDOut", "DDX")))
define_op("leaky_relu_grad_grad", inputs=["X", "DDX"], outputs=["DDOut"], grad=None,
          attrs={"alpha": ("float", 0.02)})(_like(("DDOut", "DDX")))
# elu: the gradient's own gradient through X; square: likewise; sqrt reads its output, so its
# second gradient goes to Out (DOut) rather than X
define_op("elu_grad_grad", inputs=["X", "DOut", "DDX"], outputs=["DX?", "DDOut?"], grad=None,
          attrs={"alpha": ("float", 1.0)})(_like(("DX", "X"), ("DDOut", "DDX")))
define_op("square_grad_grad", inputs=["X", "DOut", "DDX"], outputs=["DX?", "DDOut?"],
          grad=None)(_like(("DX", "X"), ("DDOut", "DDX")))
define_op("sqrt_grad_grad", inputs=["Out", "DX", "DDX"], outputs=["DOut?", "DDOut?"],
          grad=None)(_like(("DOut", "Out"), ("DDOut", "DDX")))
# reshape2's, squeeze2's, unsqueeze2's and flatten2's: DDX given DOut's shape
define_op("reshape2_grad_grad", inputs=["DOut", "DDX"], outputs=["DDOut"], grad=None)(
    _like(("DDOut", "DOut")))


@define_op("elementwise_div_grad_grad", inputs=["Y", "Out", "DOut", "DDX?", "DDY?"],
           outputs=["Y@GRAD?", "Out@GRAD?", "DDOut?"], grad=None,
           attrs={"axis": ("int", -1), "use_mkldnn": ("bool", False)})
def _div_grad_grad(ctx):
    """Out = X / Y's grad op (dX = dOut / Y, dY = -dOut * Out / Y) differentiated: the
    gradients of Y, Out and dOut, given those of dX (DDX) and dY (DDY)."""
    ctx.set_output_like("Y@GRAD", "Y")
    ctx.set_output_like("Out@GRAD", "Out")
    ctx.set_output_like("DDOut", "DOut")


@define_op("instance_norm_grad_grad",
           inputs=["X", "Scale?", "DY", "DDX?", "DDScale?", "DDBias?"],
           outputs=["DX?", "DScale?", "DDY?"], grad=None, attrs={"epsilon": ("float", 1e-5)})
def _instance_norm_grad_grad(ctx):
    """instance_norm's grad op differentiated: given the gradients of its outputs dX, dScale,
    dBias (DDX, DDScale, DDBias), the gradients of its inputs X, Scale and dY. The group
    statistics are taken from X again: the saved ones carry no gradient of their own."""
    ctx.set_output_like("DX", "X")
    ctx.set_output_like("DScale", "Scale")
    ctx.set_output_like("DDY", "DY")


@define_op("batch_norm_grad_grad",
           inputs=["X", "Scale", "Mean?", "Variance?", "DY", "DDX?", "DDScale?", "DDBias?"],
           outputs=["DX?", "DScale?", "DDY?"], grad=None,
           attrs={"epsilon": ("float", 1e-5), "data_layout": ("str", "NCHW"),
                  "is_test": ("bool", False), "use_global_stats": ("bool", False),
                  "trainable_statistics": ("bool", False)})
def _batch_norm_grad_grad(ctx):
    """batch_norm's grad op differentiated (as instance_norm's, the groups being channels
    over the batch; Mean and Variance are the running statistics, read when the forward used
    them)."""
    ctx.set_output_like("DX", "X")
    ctx.set_output_like("DScale", "Scale")
    ctx.set_output_like("DDY", "DY")
