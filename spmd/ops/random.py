"""Op definitions: random tensors. Each draws from the program's generator (`random=True`: the
kernel gets the run's numpy Generator), or from its own when given a nonzero `seed`."""
from __future__ import annotations

from .creation import BATCH_LIKE_ATTRS, batch_size_like_shape
from .registry import define_op
from .tensor import SHAPE_TENSORS, _check_int_dtype, _prod, shape_from_tensors


def _random_infer(ctx):
    shape = shape_from_tensors(ctx)
    runtime = ctx.has_input("ShapeTensor") or ctx.has_input("ShapeTensorList")
    ctx.check(len(shape) > 0, "attribute 'shape' must list at least one dimension, got []")
    ctx.check(all(d >= 0 or (runtime and d == -1) for d in shape),
              f"attribute 'shape' must hold sizes >= 0, got {shape}")
    ctx.set_output("Out", shape, ctx.attr("dtype"))


_RANDOM_COMMON = {"shape": ("ints", []), "seed": ("int", 0), "dtype": ("dtype", "float32")}
_UNIFORM = {"min": ("float", -1.0), "max": ("float", 1.0), "diag_num": ("int", 0),
            "diag_step": ("int", 0), "diag_val": ("float", 1.0)}


def _check_uniform(ctx, shape):
    lo, hi = ctx.attr("min"), ctx.attr("max")
    ctx.check(lo <= hi, f"min must not exceed max, got min={lo}, max={hi}")
    num, step = ctx.attr("diag_num"), ctx.attr("diag_step")
    size = _prod(shape)
    if num > 0 and size >= 0:
        last = (num - 1) * (step + 1)  # the flat position of the last diagonal element
        ctx.check(step >= 0 and last < size,
                  f"diag_num={num}, diag_step={step} place element {last} outside the "
                  f"{size} elements of shape {shape}")


@define_op("uniform_random", inputs=SHAPE_TENSORS, outputs=["Out"], grad=None, random=True,
           attrs={**_RANDOM_COMMON, **_UNIFORM})
def _uniform_random(ctx):
    _random_infer(ctx)
    _check_uniform(ctx, shape_from_tensors(ctx))


@define_op("gaussian_random", inputs=SHAPE_TENSORS, outputs=["Out"], grad=None, random=True,
           attrs={**_RANDOM_COMMON, "mean": ("float", 0.0), "std": ("float", 1.0),
                  "use_mkldnn": ("bool", False)})
def _gaussian_random(ctx):
    _random_infer(ctx)
    ctx.check(ctx.attr("std") >= 0, f"std must be >= 0, got {ctx.attr('std')}")


@define_op("truncated_gaussian_random", outputs=["Out"], grad=None, random=True,
           attrs={**_RANDOM_COMMON, "mean": ("float", 0.0), "std": ("float", 1.0)})
def _truncated_gaussian_random(ctx):
    _random_infer(ctx)
    ctx.check(ctx.attr("std") >= 0, f"std must be >= 0, got {ctx.attr('std')}")


@define_op("uniform_random_batch_size_like", inputs=["Input"], outputs=["Out"], grad=None,
           random=True, attrs={**BATCH_LIKE_ATTRS, **_UNIFORM, "seed": ("int", 0)})
def _uniform_random_batch_size_like(ctx):
    shape = batch_size_like_shape(ctx)
    _check_uniform(ctx, shape)
    ctx.set_output("Out", shape, ctx.attr("dtype"))


@define_op("gaussian_random_batch_size_like", inputs=["Input"], outputs=["Out"], grad=None,
           random=True, attrs={**BATCH_LIKE_ATTRS, "mean": ("float", 0.0), "std": ("float", 1.0),
                               "seed": ("int", 0)})
def _gaussian_random_batch_size_like(ctx):
    ctx.check(ctx.attr("std") >= 0, f"std must be >= 0, got {ctx.attr('std')}")
    ctx.set_output("Out", batch_size_like_shape(ctx), ctx.attr("dtype"))


@define_op("randint", inputs=SHAPE_TENSORS, outputs=["Out"], grad=None, random=True,
           attrs={"shape": ("ints", []), "low": ("int", 0), "high": ("int", 0),
                  "dtype": ("dtype", "int64"), "seed": ("int", 0)})
def _randint(ctx):
    ctx.check(ctx.attr("low") < ctx.attr("high"),
              f"low must be less than high, got low={ctx.attr('low')}, high={ctx.attr('high')}")
    _random_infer(ctx)


@define_op("randperm", outputs=["Out"], grad=None, random=True,
           attrs={"n": ("int", 1), "dtype": ("dtype", "int64"), "seed": ("int", 0)})
def _randperm(ctx):
    ctx.check(ctx.attr("n") >= 1, f"n must be >= 1, got {ctx.attr('n')}")
    ctx.set_output("Out", (ctx.attr("n"),), ctx.attr("dtype"))


@define_op("random_crop", inputs=["X", "Seed?"], outputs=["Out", "SeedOut?"], grad=None,
           random=True, attrs={"shape": ("ints", []), "startup_seed": ("int", 0)})
def _random_crop(ctx):
    x, shape = ctx.input("X"), ctx.attr("shape")
    k = len(x.shape) - len(shape)
    ctx.check(k >= 0 and all(d < 0 or d >= s for d, s in zip(x.shape[k:], shape)),
              f"shape {shape} must fit in the trailing dims of X {list(x.shape)}")
    ctx.set_output("Out", tuple(x.shape[:k]) + tuple(shape), x.dtype)
    if ctx.has_input("Seed"):
        _check_int_dtype(ctx, ctx.input("Seed"), "Seed")
        ctx.set_output_like("SeedOut", "Seed")


@define_op("sampling_id", inputs=["X"], outputs=["Out"], grad=None, random=True,
           attrs={"min": ("float", 0.0), "max": ("float", 1.0), "seed": ("int", 0)})
def _sampling_id(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) == 2, f"X must be 2-D [batch, classes], got {list(x.shape)}")
    ctx.check(ctx.attr("min") <= ctx.attr("max"),
              f"min must not exceed max, got {ctx.attr('min')}, {ctx.attr('max')}")
    ctx.set_output("Out", (x.shape[0],), "int64")
