"""fluid.layers normalization builders: batch_norm, inplace_abn, layer_norm, group_norm,
instance_norm, lrn, spectral_norm and data_norm.

>>> # y = batch_norm(input=conv, act="relu")
"""
from __future__ import annotations

import math
import numbers
import warnings

from ..core import unique_name
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer, NormalInitializer
from .layout import channel_back, channel_first
from .param_attr import ParamAttr

__all__ = ["batch_norm", "data_norm", "group_norm", "inplace_abn", "instance_norm", "layer_norm",
           "lrn", "spectral_norm"]

_FLOATS = {"float16", "float32", "float64"}
_DEFAULT_MOMENTUM = 0.9  # batch_norm's attribute default, what fluid 1.8 runs with


def _unnamed(helper, dtype, **kwargs):
    """A variable named `_generated_var_<n>`: fluid 1.8's group_norm, spectral_norm and
    data_norm make their outputs so, and later unnamed variables (create_global_var's,
    which checkpoints save by name) count on from there."""
    return helper.block.create_var(dtype=dtype, **kwargs)


def _check_float(value, arg: str, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low <= value <= high:
        raise InvalidArgumentError(f"{where}: {arg} must be in [{low}, {high}], got {value!r}")
    return float(value)


def _rewire_for_overwrite(input, where: str):
    """The variable a layer that writes its result over `input` (fluid's in-place ops) reads.

    The ops already in the block that read or write `input` are rewired to a fresh variable
    holding its old value, so that `input` names the result from here on (fetching it gives
    the result, as in fluid) while the backward pass still reads the old value under the new
    name. Where that is not possible (`input` fed, a parameter, used in another block, or the
    layer built in a sub-block, where a loop would read the old value again) the result goes
    to a new variable instead, with a warning. Returns (source, target)."""
    block, name = input.block, input.name
    program = block.program
    writes = any(name in op.output_arg_names for op in block.ops)
    elsewhere = program.current_block() is not block or any(
        name in op.input_arg_names or name in op.output_arg_names
        for b in program.blocks if b is not block for op in b.ops)
    if not writes or elsewhere or input.persistable:
        warnings.warn(
            f"{where}: {name} is not computed by an op of the block building this layer (it is "
            f"fed, persistable or used in another block), so the result goes to a new "
            f"variable; fetching {name} gives its old value, where fluid would give the "
            f"result", stacklevel=3)
        return input, None
    source = block.create_var(name=unique_name.generate(name + ".before_" + where),
                              shape=input.shape, dtype=input.dtype,
                              stop_gradient=input.stop_gradient)
    for op in block.ops:
        for slots in (op.inputs, op.outputs):
            for slot, names in slots.items():
                if name in names:
                    slots[slot] = [source.name if n == name else n for n in names]
    return source, input


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
               bias_attr=None, data_layout="NCHW", in_place=False, name=None,
               moving_mean_name=None, moving_variance_name=None,
               do_model_average_for_mean_and_var=True, use_global_stats=False):
    """Batch normalization over every dim but the channel (dim 1 for NCHW and for [N, C]
    inputs, the last dim for NHWC).

    Creates scale `batch_norm_<n>.w_0` (ones), bias `.b_0` (zeros), and the non-trainable
    moving mean `.w_1` (zeros) and variance `.w_2` (ones), which training updates in place:
    moving = momentum * moving + (1 - momentum) * batch statistic.

    `in_place=True` writes the result over `input` (fetching it gives the result), as fluid;
    fluid 1.8.5 then cannot differentiate it (its batch_norm_grad refuses "X@GRAD and Y@GRAD
    inplaced"), while spmd's backward reads the renamed old value (_rewire_for_overwrite).

    `momentum` given as a Variable is not read, as in fluid 1.8.5: its layer passes the
    Variable under a misspelled input name ("MomemtumTensor") that the op never reads, so the
    op runs with the attribute's default momentum, 0.9 (checked against fluid 1.8.5 in
    tests/unit/test_norm_fluid.py). spmd does the same, so a fluid program trains the same
    here, and warns. Give a float to choose the momentum.

    >>> # y = batch_norm(x [N, 16, 8, 8])      # four parameters of shape [16]
    """
    return _batch_norm("batch_norm", input, act, is_test, momentum, epsilon, param_attr,
                       bias_attr, data_layout, in_place, name, moving_mean_name,
                       moving_variance_name, do_model_average_for_mean_and_var,
                       use_global_stats)


def _batch_norm(layer_type, input, act, is_test, momentum, epsilon, param_attr, bias_attr,
                data_layout, in_place, name, moving_mean_name, moving_variance_name,
                do_model_average_for_mean_and_var, use_global_stats, out=None):
    where = layer_type
    check_variable(input, "input", where, dtypes=_FLOATS)
    if data_layout not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(
            f"{where}: data_layout must be 'NCHW' or 'NHWC', got {data_layout!r}")
    if input.ndim < 2:
        raise InvalidArgumentError(
            f"{where}: input must have at least 2 dims, got {input.name} {list(input.shape)}")
    channels = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if channels <= 0:
        raise InvalidArgumentError(
            f"{where}: the channel dim of {input.name} {list(input.shape)} must be known")
    if isinstance(momentum, Variable):
        warnings.warn(
            f"{where}: momentum is the Variable {momentum.name}, which fluid 1.8 never reads "
            f"(its layer passes it under a misspelled input name); the op uses the default "
            f"momentum 0.9, as fluid does. Pass a float to choose the momentum.", stacklevel=3)
        momentum = _DEFAULT_MOMENTUM
    momentum = _check_float(momentum, "momentum", where, 0.0, 1.0)
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper(layer_type, param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    # fluid keeps half-precision inputs' statistics in float32
    dtype = "float32" if input.dtype == "float16" else input.dtype
    shape = [channels]
    scale = helper.create_parameter(helper.param_attr, shape, dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias_attr = helper.bias_attr
    if bias_attr is False:
        raise InvalidArgumentError(f"{where}: bias_attr=False is not supported; batch_norm "
                                   f"always has a bias (give a ParamAttr or None)")
    bias = helper.create_parameter(bias_attr, shape, dtype, is_bias=True)
    mean = helper.create_parameter(
        ParamAttr(name=moving_mean_name, initializer=ConstantInitializer(0.0), trainable=False,
                  do_model_average=do_model_average_for_mean_and_var), shape, dtype)
    variance = helper.create_parameter(
        ParamAttr(name=moving_variance_name, initializer=ConstantInitializer(1.0),
                  trainable=False, do_model_average=do_model_average_for_mean_and_var),
        shape, dtype)
    saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    if out is None and in_place:
        input, out = _rewire_for_overwrite(input, where)
    if out is None:
        out = helper.create_variable_for_type_inference(input.dtype)
    inputs = {"X": [input], "Scale": [scale], "Bias": [bias], "Mean": [mean],
              "Variance": [variance]}
    attrs = {"epsilon": epsilon, "is_test": bool(is_test), "data_layout": data_layout,
             "use_global_stats": bool(use_global_stats), "momentum": momentum}
    helper.append_op("batch_norm", inputs,
                     {"Y": [out], "MeanOut": [mean], "VarianceOut": [variance],
                      "SavedMean": [saved_mean], "SavedVariance": [saved_variance]},
                     attrs, compat_attrs={"use_mkldnn": False, "fuse_with_relu": False})
    return out if layer_type == "inplace_abn" else helper.append_activation(out)


def layer_norm(input, scale=True, shift=True, begin_norm_axis=1, epsilon=1e-05,
               param_attr=None, bias_attr=None, act=None, name=None):
    """Normalize over dims begin_norm_axis.. of each sample, then scale (ones) and shift
    (zeros), both of shape [prod(input.shape[begin_norm_axis:])].

    >>> # y = layer_norm(x [N, 10, 32], begin_norm_axis=2)   # scale, bias of shape [32]
    """
    where = "layer_norm"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if isinstance(begin_norm_axis, bool) or not isinstance(begin_norm_axis, int) or not (
            0 < begin_norm_axis < input.ndim):
        raise InvalidArgumentError(
            f"{where}: begin_norm_axis={begin_norm_axis!r} must be in [1, {input.ndim - 1}] "
            f"for {input.name} {list(input.shape)}")
    norm_dims = input.shape[begin_norm_axis:]
    if any(d < 0 for d in norm_dims):
        raise InvalidArgumentError(
            f"{where}: the normalized dims {list(norm_dims)} of {input.name} must be known")
    for on, arg, attr in ((scale, "scale", param_attr), (shift, "shift", bias_attr)):
        if on and attr is False:  # fluid 1.8 asserts the same
            raise InvalidArgumentError(
                f"{where}: {arg}=True but its attr is False; pass {arg}=False to go without "
                f"it, or a ParamAttr / None")
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper("layer_norm", param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    dtype = input.dtype
    shape = [math.prod(norm_dims)]
    inputs = {"X": [input]}
    if scale:
        inputs["Scale"] = [helper.create_parameter(
            helper.param_attr, shape, dtype, default_initializer=ConstantInitializer(1.0))]
    if shift:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, shape, dtype, is_bias=True)]
    mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("layer_norm", inputs, {"Y": [out], "Mean": [mean], "Variance": [variance]},
                     {"epsilon": epsilon, "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out)


_ABN_ACTS = (None, "identity", "leaky_relu", "elu")


def inplace_abn(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None,
                bias_attr=None, data_layout="NCHW", name=None, moving_mean_name=None,
                moving_variance_name=None, do_model_average_for_mean_and_var=True,
                use_global_stats=False, act_alpha=1.0):
    """In-place activated batch norm: batch_norm followed by the activation act
    (None/'identity', 'leaky_relu' or 'elu', with act_alpha), written over `input` and
    returning `input` itself, as fluid 1.8 does (its op's Y is X): ops added later that read
    `input` read the result, and fetching it gives the result. Parameters are named
    `inplace_abn_<n>.w_0` ... as in fluid; the numbers and gradients are those of fluid's
    inplace_abn op.

    Differences from fluid, both documented in tests/unit/test_norm_fluid.py: spmd runs it as
    batch_norm + activation ops reading a renamed copy of the old value (see
    _rewire_for_overwrite), so after a training step `input` still holds the result, where
    fluid's backward writes the recovered input back over it; and an `input` that no op of
    its block computes (a fed variable) is not overwritten: the result is a new variable.

    >>> # y = inplace_abn(x [N, 8, 4, 4], act="leaky_relu", act_alpha=0.1)   # y is x
    """
    if act not in _ABN_ACTS:
        raise InvalidArgumentError(f"inplace_abn: act must be one of {list(_ABN_ACTS)}, got "
                                   f"{act!r}")
    source, target = _rewire_for_overwrite(input, "inplace_abn")
    plain = act in (None, "identity")
    out = _batch_norm("inplace_abn", source, None, is_test, momentum, epsilon, param_attr,
                      bias_attr, data_layout, False, name, moving_mean_name,
                      moving_variance_name, do_model_average_for_mean_and_var,
                      use_global_stats, out=target if plain else None)
    if plain:
        return out
    result = target if target is not None else out.block.create_var(
        name=unique_name.generate("inplace_abn.tmp"), dtype=out.dtype)
    out.block.append_op(act, {"X": [out]}, {"Out": [result]}, {"alpha": float(act_alpha)})
    return result


def group_norm(input, groups, epsilon=1e-05, param_attr=None, bias_attr=None, act=None,
               data_layout="NCHW", name=None):
    """Normalize each sample over `groups` groups of channels. As in fluid 1.8, the scale
    (ones) and bias (zeros) of shape [C] exist only when param_attr / bias_attr are given
    (truthy); None means none.

    Without a scale (the default), the input gradient is fluid 1.8's, which is not the exact
    derivative: fluid's kernel drops the -mean(dY) / sigma term of each group. spmd follows
    it so that a fluid program trains the same here (the difference is a per-group constant;
    give param_attr to get the exact gradient, which fluid computes with a scale).

    >>> # y = group_norm(x [N, 8, 4, 4], groups=4, param_attr=fluid.ParamAttr())
    """
    where = "group_norm"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    if data_layout not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(f"{where}: data_layout must be 'NCHW' or 'NHWC', got "
                                   f"{data_layout!r}")
    if input.ndim < 2:
        raise InvalidArgumentError(f"{where}: input must have at least 2 dims")
    c = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0 or (
            c > 0 and c % groups):
        raise InvalidArgumentError(f"{where}: groups={groups!r} must be a positive divisor of "
                                   f"the {c} channels")
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper(where, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    inputs = {"X": [channel_first(helper, input, "NHWC" if data_layout == "NHWC" else "NCHW")]}
    if param_attr:
        inputs["Scale"] = [helper.create_parameter(helper.param_attr, [c], input.dtype,
                                                   default_initializer=ConstantInitializer(1.0))]
    if bias_attr:
        inputs["Bias"] = [helper.create_parameter(helper.bias_attr, [c], input.dtype,
                                                  is_bias=True)]
    mean = _unnamed(helper, input.dtype, stop_gradient=True)
    var = _unnamed(helper, input.dtype, stop_gradient=True)
    out = _unnamed(helper, input.dtype)
    helper.append_op(where, inputs, {"Y": [out], "Mean": [mean], "Variance": [var]},
                     {"epsilon": epsilon, "groups": groups, "data_layout": "NCHW"})
    out = channel_back(helper, out, "NHWC" if data_layout == "NHWC" else "NCHW")
    return helper.append_activation(out)


def instance_norm(input, epsilon=1e-05, param_attr=None, bias_attr=None, name=None):
    """Normalize each channel of each sample over its spatial dims, then scale (ones) and
    shift (zeros), both [C].

    >>> # y = instance_norm(x [N, 3, 8, 8])
    """
    where = "instance_norm"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if not 2 <= input.ndim <= 5 or input.shape[1] <= 0:
        raise InvalidArgumentError(f"{where}: input must have 2 to 5 dims and known channels, "
                                   f"got {list(input.shape)}")
    epsilon = _check_float(epsilon, "epsilon", where, 0.0, math.inf)
    helper = LayerHelper(where, param_attr=param_attr, bias_attr=bias_attr, name=name)
    dtype = "float32" if input.dtype == "float16" else input.dtype
    c = input.shape[1]
    scale = helper.create_parameter(helper.param_attr, [c], dtype,
                                    default_initializer=ConstantInitializer(1.0))
    bias = helper.create_parameter(helper.bias_attr, [c], dtype, is_bias=True)
    saved = [helper.create_variable_for_type_inference(dtype, stop_gradient=True)
             for _ in range(2)]
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(where, {"X": [input], "Scale": [scale], "Bias": [bias]},
                     {"Y": [out], "SavedMean": [saved[0]], "SavedVariance": [saved[1]]},
                     {"epsilon": epsilon})
    return out


def lrn(input, n=5, k=1.0, alpha=1e-4, beta=0.75, name=None, data_format="NCHW"):
    """Local response normalization across channels: out = x / (k + alpha * sum of x^2 over
    the n channels around it)^beta (fluid does not divide alpha by n).

    >>> # y = lrn(x [N, 16, 8, 8], n=5, k=1.0, alpha=1e-4, beta=0.75)
    """
    where = "lrn"
    check_variable(input, "input", where, dtypes={"float32"})
    if data_format not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(f"{where}: data_format must be 'NCHW' or 'NHWC', got "
                                   f"{data_format!r}")
    if input.ndim != 4:
        raise InvalidArgumentError(f"{where}: input must be 4-D, got {list(input.shape)}")
    helper = LayerHelper(where, name=name)
    x = channel_first(helper, input, data_format)
    # MidOut first: fluid names it lrn_<n>.tmp_0 and the output .tmp_1
    mid = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, {"X": [x]}, {"Out": [out], "MidOut": [mid]},
                     {"n": int(n), "k": float(k), "alpha": float(alpha), "beta": float(beta),
                      "data_format": "NCHW"})
    return channel_back(helper, out, data_format)


def spectral_norm(weight, dim=0, power_iters=1, eps=1e-12, name=None):
    """weight divided by its largest singular value (weight viewed as [shape[dim], rest]),
    estimated by power_iters power-iteration steps from the vectors U [shape[dim]] and
    V [rest], parameters initialized Normal(0, 1) as in fluid (never updated: the op iterates
    on copies, as fluid's). The weight's gradient is fluid 1.8's formula, not the exact
    derivative (see spmd/kernels/sampling.py); spmd follows it so training matches fluid.

    >>> # w_sn = spectral_norm(w [8, 4, 3, 3], dim=0, power_iters=2)
    """
    where = "spectral_norm"
    check_variable(weight, "weight", where, dtypes={"float32", "float64"})
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < weight.ndim:
        raise InvalidArgumentError(f"{where}: dim={dim!r} must be a dim of {weight.name} "
                                   f"{list(weight.shape)}")
    if isinstance(power_iters, bool) or not isinstance(power_iters, int) or power_iters < 0:
        raise InvalidArgumentError(f"{where}: power_iters must be an int >= 0")
    if any(d <= 0 for d in weight.shape):
        raise InvalidArgumentError(f"{where}: the shape of {weight.name} {list(weight.shape)} "
                                   f"must be known")
    helper = LayerHelper(where, name=name)
    h = weight.shape[dim]
    w = math.prod(weight.shape) // h
    vectors = []
    for size in (h, w):
        p = helper.create_parameter(ParamAttr(), [size], weight.dtype,
                                    default_initializer=NormalInitializer(0.0, 1.0))
        p.stop_gradient = True
        vectors.append(p)
    out = _unnamed(helper, weight.dtype)
    helper.append_op(where, {"Weight": [weight], "U": [vectors[0]], "V": [vectors[1]]},
                     {"Out": [out]},
                     {"dim": dim, "power_iters": power_iters, "eps": float(eps)})
    return out


def data_norm(input, act=None, epsilon=1e-05, param_attr=None, data_layout="NCHW",
              in_place=False, name=None, moving_mean_name=None, moving_variance_name=None,
              do_model_average_for_mean_and_var=True, slot_dim=-1, sync_stats=False,
              summary_decay_rate=0.9999999, enable_scale_and_shift=False):
    """Normalize [N, C] input by accumulated statistics: y = (x - sum/size) *
    sqrt(size/square_sum), from the parameters `<name>.batch_size`, `.batch_sum`,
    `.batch_square_sum` (name defaults to "dn", so unnamed data_norm layers share them, as in
    fluid). Training applies the batch's count, sum and centered square sum to them through
    the optimizer, fluid's rule. param_attr may be a dict of initial values (batch_size,
    batch_sum, batch_square, scale_w, bias); slot_dim > 0 treats each run of slot_dim
    columns as a slot, empty (first value 0) slots giving 0.

    >>> # y = data_norm(x [N, 16], param_attr={"batch_size": 1e4, "batch_square": 1e4})
    """
    where = "data_norm"
    check_variable(input, "input", where, dtypes={"float32", "float64"})
    if data_layout not in ("NCHW", "NHWC"):
        raise InvalidArgumentError(f"{where}: data_layout must be 'NCHW' or 'NHWC', got "
                                   f"{data_layout!r}")
    if input.ndim != 2 or input.shape[1] <= 0:
        raise InvalidArgumentError(f"{where}: input must be 2-D [N, C] with known C, got "
                                   f"{list(input.shape)}")
    init = param_attr if isinstance(param_attr, dict) else {}
    defaults = {"batch_size": init.get("batch_size", 1e4),
                "batch_sum": init.get("batch_sum", 0.0),
                "batch_square_sum": init.get("batch_square", 1e4)}
    name = "dn" if name is None else name
    helper = LayerHelper(where, act=act)
    c = input.shape[1]

    def param(suffix, value):
        return helper.create_parameter(
            ParamAttr(name=f"{name}.{suffix}", initializer=ConstantInitializer(float(value)),
                      trainable=True), [c], input.dtype)

    inputs = {}
    if enable_scale_and_shift:
        inputs["scale_w"] = [param("scale_w", init.get("scale_w", 1.0))]
        inputs["bias"] = [param("bias", init.get("bias", 0.0))]
    inputs.update({"X": [input], "BatchSize": [param("batch_size", defaults["batch_size"])],
                   "BatchSum": [param("batch_sum", defaults["batch_sum"])],
                   "BatchSquareSum": [param("batch_square_sum", defaults["batch_square_sum"])]})
    means = _unnamed(helper, input.dtype, stop_gradient=True)
    scales = _unnamed(helper, input.dtype, stop_gradient=True)
    out = None
    if in_place:  # written over input, as fluid; the gradient reads the renamed old value
        inputs["X"][0], out = _rewire_for_overwrite(input, where)
    if out is None:
        out = _unnamed(helper, input.dtype)
    helper.append_op(where, inputs, {"Y": [out], "Means": [means], "Scales": [scales]},
                     {"epsilon": float(epsilon), "slot_dim": int(slot_dim),
                      "sync_stats": bool(sync_stats),
                      "summary_decay_rate": float(summary_decay_rate),
                      "enable_scale_and_shift": bool(enable_scale_and_shift)})
    return helper.append_activation(out)
