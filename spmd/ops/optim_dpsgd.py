"""Op definition: dpsgd, fluid 1.8's differentially private SGD update (one op per parameter,
as fluid's DpsgdOptimizer appends it; the formula is in spmd/kernels/optim_dpsgd.py)."""
from __future__ import annotations

from .optim_common import check_same_shape, check_scalar
from .registry import define_op


@define_op("dpsgd", inputs=["Param", "Grad", "LearningRate"], outputs=["ParamOut"], grad=None,
           attrs={"clip": ("float", 10.0), "batch_size": ("float", 16.0),
                  "sigma": ("float", 1.0), "seed": ("int", 0)})
def _dpsgd(ctx):
    check_same_shape(ctx, "Grad")
    check_scalar(ctx, "LearningRate")
    ctx.check(ctx.attr("clip") > 0 and ctx.attr("batch_size") > 0 and ctx.attr("sigma") >= 0,
              f"needs clip > 0, batch_size > 0 and sigma >= 0, got clip={ctx.attr('clip')}, "
              f"batch_size={ctx.attr('batch_size')}, sigma={ctx.attr('sigma')}")
    ctx.set_output_like("ParamOut", "Param")
