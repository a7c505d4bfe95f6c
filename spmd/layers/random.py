"""fluid.layers: random tensors. They draw from the program's generator (seeded by the
program's `random_seed`, so a seeded program repeats), or from their own generator when given
a nonzero `seed`.

>>> # noise = gaussian_random(shape=[4, 8], std=0.1)
"""
from __future__ import annotations

from ..core import unique_name
from ..core.dtypes import convert_dtype
from ..core.variable import Variable
from ..errors import ArgumentTypeError, InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer
from .tensor import _int_list, shape_inputs

__all__ = [
    "gaussian_random", "gaussian_random_batch_size_like", "randint", "randn", "randperm",
    "random_crop", "sampling_id", "uniform_random", "uniform_random_batch_size_like",
]

_FLOATS = ("float32", "float64")


class EmptyShapeError(InvalidArgumentError, AssertionError):
    """randn given shape []: fluid 1.8 asserts `len(shape) > 0` there, so `except
    AssertionError` catches it as in fluid, and `except InvalidArgumentError` as any bad value."""


def _float_dtype(dtype, where):
    dtype = convert_dtype(dtype)
    if dtype not in _FLOATS:
        # fluid's check_dtype raises TypeError for a non-float dtype
        raise ArgumentTypeError(f"{where}: dtype must be float32 or float64, got {dtype}")
    return dtype


def _shaped(layer, op, shape, dtype, attrs, out=None, name=None):
    helper = LayerHelper(layer, name=name)
    inputs: dict = {}
    attrs = {**attrs, "shape": shape_inputs(helper, shape, inputs, layer), "dtype": dtype}
    if isinstance(shape, (list, tuple)) and not shape:
        raise InvalidArgumentError(f"{layer}: shape must not be empty")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(op, inputs, {"Out": [out]}, attrs)
    return out


def uniform_random(shape, dtype="float32", min=-1.0, max=1.0, seed=0):  # noqa: A002
    """Uniform values in [min, max) of `shape` (a list that may hold Variables, or a 1-D
    int Variable). dtype="float64" gives float64 (fluid 1.8 gives float32 whatever dtype says).

    >>> # u = uniform_random([2, 3], min=0.0, max=1.0)
    """
    return _shaped("uniform_random", "uniform_random", shape,
                   _float_dtype(dtype, "uniform_random"),
                   {"min": float(min), "max": float(max), "seed": int(seed)})


def gaussian_random(shape, mean=0.0, std=1.0, seed=0, dtype="float32"):
    """Normal values N(mean, std^2) of `shape`.

    >>> # g = gaussian_random([2, 3], mean=1.0, std=0.5)
    """
    return _shaped("gaussian_random", "gaussian_random", shape,
                   _float_dtype(dtype, "gaussian_random"),
                   {"mean": float(mean), "std": float(std), "seed": int(seed)})


def randn(shape, out=None, dtype=None, device=None, stop_gradient=True, name=None):
    """Standard normal values of `shape` (float32 by default). fluid 1.8 fixed a random seed
    when building; here the program's generator draws, so `random_seed` makes it repeat.

    >>> # r = randn([2, 3])
    """
    # the error types are fluid's: check_type's TypeError, then `assert len(shape) > 0`
    if not isinstance(shape, (list, tuple)):
        raise ArgumentTypeError(
            f"randn: shape must be a list or tuple of ints, got {type(shape).__name__} {shape!r}")
    if not shape:
        raise EmptyShapeError("randn: shape must not be empty, got []; give e.g. shape=[1]")
    out = _shaped("randn", "gaussian_random", shape, _float_dtype(dtype or "float32", "randn"),
                  {"mean": 0.0, "std": 1.0, "seed": 0}, out=out, name=name)
    out.stop_gradient = stop_gradient
    return out


def randint(low, high=None, shape=None, out=None, dtype=None, device=None,
            stop_gradient=False, seed=0, name=None):
    """Integers uniform in [low, high) (or [0, low) when high is None) of `shape` ([1] by
    default), int64 by default.

    >>> # r = randint(0, 10, shape=[3])
    """
    if high is None:
        low, high = 0, low
    if low >= high:
        raise InvalidArgumentError(
            f"randint: low must be less than high, got low={low}, high={high}")
    dtype = convert_dtype(dtype or "int64")
    if dtype not in ("int32", "int64"):
        raise InvalidArgumentError(f"randint: dtype must be int32 or int64, got {dtype}")
    out = _shaped("randint", "randint", [1] if shape is None else shape, dtype,
                  {"low": int(low), "high": int(high), "seed": int(seed)}, out=out, name=name)
    out.stop_gradient = stop_gradient
    return out


def randperm(n, out=None, dtype="int64", device=None, stop_gradient=True, seed=0):
    """A random permutation of 0..n-1.

    >>> # p = randperm(5)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"randperm: n must be an int >= 1, got {n!r}")
    helper = LayerHelper("randperm")
    dtype = convert_dtype(dtype)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("randperm", {}, {"Out": [out]},
                     {"n": n, "dtype": out.dtype, "seed": int(seed)})
    if stop_gradient:
        out.stop_gradient = True
    return out


def _batch_like(layer, input, shape, dtype, input_dim_idx, output_dim_idx, attrs):
    helper = LayerHelper(layer)
    check_variable(input, "input", layer)
    dtype = _float_dtype(dtype, layer)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(layer, {"Input": [input]}, {"Out": [out]},
                     {**attrs, "shape": _int_list(shape, "shape", layer), "dtype": dtype,
                      "input_dim_idx": int(input_dim_idx),
                      "output_dim_idx": int(output_dim_idx)})
    return out


def uniform_random_batch_size_like(input, shape, dtype="float32", input_dim_idx=0,
                                   output_dim_idx=0, min=-1.0, max=1.0, seed=0):  # noqa: A002
    """uniform_random whose dim output_dim_idx is input's dim input_dim_idx (the batch).

    >>> # u = uniform_random_batch_size_like(x, shape=[-1, 8])
    """
    return _batch_like("uniform_random_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx, {"min": float(min), "max": float(max),
                                        "seed": int(seed)})


def gaussian_random_batch_size_like(input, shape, input_dim_idx=0, output_dim_idx=0,
                                    mean=0.0, std=1.0, seed=0, dtype="float32"):
    """gaussian_random whose dim output_dim_idx is input's dim input_dim_idx (the batch).

    >>> # g = gaussian_random_batch_size_like(x, shape=[-1, 8], std=0.1)
    """
    return _batch_like("gaussian_random_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx, {"mean": float(mean), "std": float(std),
                                        "seed": int(seed)})


def random_crop(x, shape, seed=None):
    """A random window of `shape` in the trailing dims of x, one per instance. An int seed
    (or an int64 [1] Variable) starts a persistable seed that advances every run, so a
    seeded program repeats its sequence of crops; seed None draws from the program's
    generator.

    >>> # crops = random_crop(images [N, 3, 32, 32], shape=[3, 28, 28], seed=1)
    """
    helper = LayerHelper("random_crop")
    check_variable(x, "x", "random_crop")
    shape = _int_list(shape, "shape", "random_crop")
    out = helper.create_variable_for_type_inference(x.dtype)
    inputs, outputs = {"X": [x]}, {"Out": [out]}
    if isinstance(seed, int) and not isinstance(seed, bool):
        var = helper.create_global_variable(
            [1], "int64", persistable=True, name=unique_name.generate("random_crop_seed"),
            stop_gradient=True)
        helper.set_variable_initializer(var, ConstantInitializer(float(seed)))
        seed = var
    if isinstance(seed, Variable):
        inputs["Seed"], outputs["SeedOut"] = [seed], [seed]
    elif seed is not None:
        raise InvalidArgumentError(f"random_crop: seed must be an int, a Variable or None, "
                                   f"got {seed!r}")
    helper.append_op("random_crop", inputs, outputs, {"shape": shape})
    return out


def sampling_id(x, min=0.0, max=1.0, seed=0, dtype="float32"):  # noqa: A002
    """One id per row of x (rows of probabilities), drawn from that row's distribution
    (int64 ids; fluid's kernel writes int64 whatever `dtype` says).

    >>> # ids = sampling_id(softmax(logits))
    """
    helper = LayerHelper("sampling_id")
    check_variable(x, "x", "sampling_id")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("sampling_id", {"X": [x]}, {"Out": [out]},
                     {"min": float(min), "max": float(max), "seed": int(seed)})
    return out
