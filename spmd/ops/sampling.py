"""Op definitions: affine_grid, grid_sampler (spatial transformer) and spectral_norm.

affine_grid maps a [N, 2, 3] affine matrix to a sampling grid [N, H, W, 2] over [-1, 1]^2;
grid_sampler reads X bilinearly at those points (corners included: -1 and 1 are the first and
last pixel centers; outside reads zero). spectral_norm divides a weight by its largest singular
value, estimated by power iteration from the U, V vectors (which it does not update); its
gradient is fluid 1.8's formula, not the exact derivative (spmd/kernels/sampling.py says why).
"""
from __future__ import annotations

from .registry import define_op


@define_op("affine_grid", inputs=["Theta", "OutputShape?"], outputs=["Output"],
           no_grad_inputs=("OutputShape",), grad_uses=("Theta", "OutputShape"),
           attrs={"output_shape": ("ints", []), "use_cudnn": ("bool", False)})
def _affine_grid(ctx):
    theta = ctx.input("Theta")
    ctx.check(len(theta.shape) == 3 and tuple(theta.shape[1:]) in ((2, 3), (-1, 3), (2, -1)),
              f"Theta must be [N, 2, 3], got {list(theta.shape)}")
    shape = ctx.attr("output_shape")
    if ctx.has_input("OutputShape"):
        ctx.set_output("Output", (theta.shape[0], -1, -1, 2), theta.dtype)
        return
    ctx.check(len(shape) == 4, f"output_shape must be [N, C, H, W], got {shape}")
    ctx.set_output("Output", (theta.shape[0], shape[2], shape[3], 2), theta.dtype)


@define_op("grid_sampler", inputs=["X", "Grid"], outputs=["Output"], grad_uses=("X", "Grid"),
           attrs={"use_cudnn": ("bool", False)})
def _grid_sampler(ctx):
    x, grid = ctx.input("X"), ctx.input("Grid")
    ctx.check(len(x.shape) == 4, f"X must be 4-D NCHW, got {list(x.shape)}")
    ctx.check(len(grid.shape) == 4 and grid.shape[3] in (2, -1),
              f"Grid must be [N, H, W, 2], got {list(grid.shape)}")
    ctx.check(x.dtype == grid.dtype, f"X is {x.dtype} but Grid is {grid.dtype}")
    ctx.check(all(a < 0 or b < 0 or a == b for a, b in zip(x.shape[2:], grid.shape[1:3])),
              f"Grid{list(grid.shape)} must have X{list(x.shape)}'s height and width (fluid "
              f"1.8 samples an output the size of X)")
    ctx.set_output("Output", (x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype)


@define_op("spectral_norm", inputs=["Weight", "U", "V"], outputs=["Out"],
           no_grad_inputs=("U", "V"), grad_uses=("Weight", "U", "V"),
           attrs={"dim": ("int", 0), "power_iters": ("int", 1), "eps": ("float", 1e-12)})
def _spectral_norm(ctx):
    w, u, v = ctx.input("Weight"), ctx.input("U"), ctx.input("V")
    dim = ctx.attr("dim")
    ctx.check(2 <= len(w.shape) <= 5, f"Weight must have 2 to 5 dims, got {list(w.shape)}")
    ctx.check(0 <= dim < len(w.shape), f"dim={dim} is not a dim of Weight{list(w.shape)}")
    ctx.check(ctx.attr("power_iters") >= 0, "power_iters must be >= 0")
    h = w.shape[dim]
    rest = 1
    for i, d in enumerate(w.shape):
        if i != dim:
            rest = -1 if d < 0 or rest < 0 else rest * d
    ctx.check(tuple(u.shape) == (h,) and tuple(v.shape) == (rest,),
              f"U must be [{h}] and V [{rest}] for Weight{list(w.shape)} and dim={dim}, got "
              f"{list(u.shape)} and {list(v.shape)}")
    ctx.set_output("Out", w.shape, w.dtype)
