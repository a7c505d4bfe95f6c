"""fluid.layers tensor builders: creating, filling, casting, joining, splitting and reshaping.

>>> # lr = create_global_var(shape=[1], value=0.1, dtype="float32", persistable=True)
"""
from __future__ import annotations

import numbers
from builtins import range as _builtin_range  # `range` below is fluid's layer

import numpy as np

from ..core import unique_name
from ..core.dtypes import convert_dtype
from ..core.variable import Variable
from ..errors import ArgumentTypeError, InvalidArgumentError
from .helper import LayerHelper, check_variable
from .initializer import ConstantInitializer, Initializer
from .param_attr import ParamAttr

__all__ = [
    "assign", "cast", "concat", "create_global_var", "create_parameter", "fill_constant",
    "flatten", "gather", "one_hot", "ones", "reshape", "slice", "split", "squeeze", "sums",
    "transpose", "unsqueeze", "zeros",
]


def _int_list(value, arg: str, where: str) -> list[int]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise InvalidArgumentError(f"{where}: {arg} must be ints, got {value!r}")
    return [int(v) for v in values]


def _shape(shape, where: str) -> list[int]:
    """A list, tuple or 1-D numpy array of ints (python or numpy), as fluid 1.8.5's
    check_type: anything else is an ArgumentTypeError (a TypeError)."""
    if isinstance(shape, np.ndarray):
        shape = shape.tolist()
    if not isinstance(shape, (list, tuple)):
        raise ArgumentTypeError(
            f"{where}: shape must be a list, tuple or numpy.ndarray, got {type(shape).__name__}")
    bad = [v for v in shape if not isinstance(v, numbers.Integral) or isinstance(v, bool)]
    if bad:
        raise ArgumentTypeError(f"{where}: the items of shape must be ints, got {shape!r}")
    dims = [int(v) for v in shape]
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{where}: shape {dims} must not have negative dims")
    return dims


def int_tensor_inputs(helper, values, what: str, dtype="int32", check_dtype=True):
    """fluid's way to pass a list that may hold Variables: the attribute keeps the python ints
    (-1 where a Variable stands) and every entry also becomes a [1] int tensor (a
    `fill_constant` for the python ones). Returns (attr_list, tensors or None).
    `check_dtype=False`: the Variables' dtype is left to the kernel, where the fluid layer
    checks none at build time (crop_tensor's list entries)."""
    if not any(isinstance(v, Variable) for v in values):
        return _int_list(values, what, helper.layer_type), None
    attr, tensors = [], []
    for v in values:
        if isinstance(v, Variable):
            check_variable(v, what, helper.layer_type,
                           dtypes={"int32", "int64"} if check_dtype else None)
            v.stop_gradient = True
            attr.append(-1)
            tensors.append(v)
        else:
            attr.append(_int_list(v, what, helper.layer_type)[0])
            tensors.append(fill_constant([1], dtype, attr[-1], force_cpu=True))
    return attr, tensors


def shape_inputs(helper, shape, op_inputs: dict, where: str) -> list[int]:
    """Adds ShapeTensor / ShapeTensorList to `op_inputs` when `shape` is (or holds) Variables;
    returns the `shape` attribute."""
    if isinstance(shape, Variable):
        check_variable(shape, "shape", where, dtypes={"int32", "int64"})
        shape.stop_gradient = True
        op_inputs["ShapeTensor"] = [shape]
        return []
    if not isinstance(shape, (list, tuple)):
        raise InvalidArgumentError(
            f"{where}: shape must be a list/tuple of ints (Variables allowed) or a "
            f"1-D int Variable, got {shape!r}")
    attr, tensors = int_tensor_inputs(helper, list(shape), "shape", "int64")
    if tensors is not None:
        op_inputs["ShapeTensorList"] = tensors
    elif any(d < 0 for d in attr):
        raise InvalidArgumentError(f"{where}: shape {attr} must not have negative dims")
    return attr


def fill_constant(shape, dtype, value, force_cpu=False, out=None, name=None):
    """A tensor of `shape` filled with `value`; `shape` may be a 1-D int Variable or a list
    holding Variables, `value` a [1] Variable; `out` is written when given.

    >>> # one = fill_constant(shape=[1], dtype="int64", value=1)
    """
    helper = LayerHelper("fill_constant", name=name)
    dtype = convert_dtype(dtype)
    inputs: dict = {}
    attrs = {"force_cpu": bool(force_cpu), "dtype": dtype}
    if isinstance(value, Variable):
        inputs["ValueTensor"] = [value]
    else:
        attrs["value"] = float(value)
        # str_value keeps int64 values exact beyond float precision, as in fluid
        attrs["str_value"] = str(int(value)) if dtype in ("int32", "int64") else str(float(value))
    attrs["shape"] = shape_inputs(helper, shape, inputs, "fill_constant")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype)
    elif out.dtype != dtype:
        raise InvalidArgumentError(
            f"fill_constant: out ({out.name}) has dtype {out.dtype}, but dtype is {dtype}")
    helper.append_op("fill_constant", inputs, {"Out": [out]}, attrs)
    out.stop_gradient = True
    return out


def zeros(shape, dtype, force_cpu=False):
    return fill_constant(shape, dtype, 0.0, force_cpu)


def ones(shape, dtype, force_cpu=False):
    return fill_constant(shape, dtype, 1.0, force_cpu)


def create_global_var(shape, value, dtype, persistable=False, force_cpu=False, name=None):
    """A global variable of `shape` set to `value` by the startup program (a learning rate, a
    step counter).

    >>> # step = create_global_var([1], 0.0, "float32", persistable=True)
    """
    helper = LayerHelper("global_var", name=name)
    dims = _shape(shape, "create_global_var")
    _dtype(dtype, "create_global_var")
    # unnamed, it is `_generated_var_<n>` as in fluid 1.8, so checkpoints name it alike
    var = helper.create_global_variable(
        shape=dims, dtype=dtype, persistable=persistable, stop_gradient=True,
        name=name if name is not None else unique_name.generate("_generated_var"))
    helper.set_variable_initializer(var, ConstantInitializer(float(value), force_cpu=force_cpu))
    return var


def create_parameter(shape, dtype, name=None, attr=None, is_bias=False,
                     default_initializer=None):
    """A parameter of `shape` (initialized in the startup program by `attr.initializer`, else
    `default_initializer`, else Xavier / Constant(0) for biases).

    >>> # w = create_parameter([4, 3], "float32", attr=ParamAttr(name="w"))
    """
    where = "create_parameter"
    dims = _shape(shape, where)
    _dtype(dtype, where)
    if attr is not None and not isinstance(attr, ParamAttr):
        raise ArgumentTypeError(f"{where}: attr must be None or a ParamAttr, got "
                                f"{type(attr).__name__}")
    if default_initializer is not None and not isinstance(default_initializer, Initializer):
        raise ArgumentTypeError(f"{where}: default_initializer must be None or an "
                                f"Initializer, got {type(default_initializer).__name__}")
    helper = LayerHelper("create_parameter", name=name)
    attr = ParamAttr(name=name) if attr is None else attr  # fluid: `name` only without `attr`
    return helper.create_parameter(attr, dims, dtype, is_bias, default_initializer)


def _dtype(dtype, where: str) -> str:
    """The dtype's name; one convert_dtype does not know is a ValueError, as fluid's."""
    try:
        return convert_dtype(dtype)
    except (TypeError, ValueError, KeyError) as e:
        raise InvalidArgumentError(f"{where}: dtype {dtype!r} is not supported ({e})") from None


def assign(input, output=None):
    """Copy a Variable (assign op) or a numpy array (assign_value op) into `output`."""
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        if output is None:
            output = helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("assign", {"X": [input]}, {"Out": [output]})
        return output
    if isinstance(input, np.ndarray):
        return _assign_value(helper, input, output)
    raise InvalidArgumentError(
        f"assign: input must be a Variable or a numpy.ndarray, got {type(input).__name__}")


def _assign_value(helper, array, output):
    dtype = convert_dtype(array.dtype)
    values = {"float32": "fp32_values", "int32": "int32_values", "int64": "int64_values",
              "bool": "bool_values"}
    if dtype not in values:
        raise InvalidArgumentError(
            f"assign: a numpy array must have dtype bool, float32, int32 or int64 (as in "
            f"fluid 1.8), got {dtype}; convert it first, e.g. array.astype('float32')")
    if array.size > 1024 * 1024:
        raise InvalidArgumentError(
            f"assign: the array has {array.size} elements, more than fluid's limit of "
            f"1048576; save it to a file and load it, or feed it instead")
    if output is None:
        output = helper.create_variable_for_type_inference(dtype)
    flat = array.reshape(-1).tolist()
    helper.append_op("assign_value", {}, {"Out": [output]},
                     {"shape": list(array.shape), "dtype": dtype,
                      values[dtype]: [int(v) for v in flat] if dtype == "bool" else flat})
    return output


def cast(x, dtype):
    """x converted to `dtype`."""
    helper = LayerHelper("cast")
    check_variable(x, "x", "cast")
    dtype = convert_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("cast", {"X": [x]}, {"Out": [out]}, {"in_dtype": x.dtype, "out_dtype": dtype})
    return out


def sums(input, out=None):
    """The elementwise sum of a list of Variables."""
    helper = LayerHelper("sum", input=input)
    xs = helper.multiple_input("input")
    if out is None:
        out = helper.create_variable_for_type_inference(helper.input_dtype("input"))
    helper.append_op("sum", {"X": xs}, {"Out": [out]})
    return out


def concat(input, axis=0, name=None):
    """Join a list of Variables along `axis`: an int, or an int Variable of shape [1].

    >>> # concat([x [2, 3], y [2, 5]], axis=1)  -> [2, 8]
    """
    helper = LayerHelper("concat", input=input, name=name)
    xs = helper.multiple_input("input")
    out = helper.create_variable_for_type_inference(helper.input_dtype("input"))
    inputs, attrs = {"X": xs}, {}
    if isinstance(axis, Variable):
        check_variable(axis, "axis", "concat", dtypes={"int32", "int64"})
        axis.stop_gradient = True  # as fluid does: an axis has no gradient
        inputs["AxisTensor"] = [axis]
    elif isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise InvalidArgumentError(f"concat: axis must be an int or an int Variable, got {axis!r}")
    else:
        attrs["axis"] = int(axis)
    helper.append_op("concat", inputs, {"Out": [out]}, attrs)
    return out


def split(input, num_or_sections, dim=-1, name=None):
    """Split `input` along `dim` into `num_or_sections` equal parts, or parts of the listed
    sizes (one may be -1); returns the list of parts."""
    helper = LayerHelper("split", name=name)
    check_variable(input, "input", "split")
    rank = input.ndim
    extra: dict = {}
    if isinstance(dim, Variable):
        check_variable(dim, "dim", "split", dtypes={"int32", "int64"})
        dim.stop_gradient = True
        extra["AxisTensor"] = [dim]
        dim = 0
    if isinstance(num_or_sections, (list, tuple)) and any(
            isinstance(s, Variable) for s in num_or_sections):
        sections, tensors = int_tensor_inputs(helper, list(num_or_sections), "num_or_sections")
        extra["SectionsTensorList"] = tensors
    if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
        raise InvalidArgumentError(f"split: dim={dim!r} is out of range for rank {rank}")
    size = -1 if extra else input.shape[dim]
    if "SectionsTensorList" in extra:
        num, count = 0, len(sections)
    elif isinstance(num_or_sections, numbers.Integral) and not isinstance(num_or_sections, bool):
        num, sections = int(num_or_sections), []
        if num <= 0 or (size >= 0 and size % num):
            raise InvalidArgumentError(
                f"split: cannot split dim {dim} of size {size} into {num} equal parts")
        count = num
    else:
        sections = _int_list(num_or_sections, "num_or_sections", "split")
        if sections.count(-1) > 1:
            raise InvalidArgumentError(f"split: at most one section may be -1, got {sections}")
        known = sum(s for s in sections if s != -1)
        if size >= 0 and (known > size or (-1 not in sections and known != size)):
            raise InvalidArgumentError(
                f"split: sections {sections} do not add up to dim {dim} of size {size}")
        num, count = 0, len(sections)
    outs = [helper.create_variable_for_type_inference(input.dtype) for _ in _builtin_range(count)]
    helper.append_op("split", {"X": [input], **extra}, {"Out": outs},
                     {"num": num, "sections": sections, "axis": dim})
    return outs


def _with_xshape(op_type: str, layer: str, x, attrs: dict, name=None, act=None):
    """The *2 reshaping ops: Out plus XShape (the input's shape, for the gradient)."""
    helper = LayerHelper(layer, name=name, act=act)
    check_variable(x, "x", layer)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op(op_type, {"X": [x]}, {"Out": [out], "XShape": [x_shape]}, attrs)
    return helper.append_activation(out)


def reshape(x, shape, actual_shape=None, act=None, inplace=False, name=None):
    """x with a new shape: 0 copies the input's dim, one -1 is inferred (reshape2). `shape`
    may be a 1-D int Variable or a list holding [1] int Variables; `actual_shape` (a 1-D int
    Variable) overrides `shape` at run time. `inplace` is accepted for fluid compatibility:
    spmd's memory passes decide reuse, the values are the same.

    >>> # reshape(x [N, 2, 6], shape=[0, 3, -1])  -> [N, 3, 4]
    """
    check_variable(x, "x", "reshape")
    inputs: dict = {"X": [x]}
    if isinstance(shape, Variable):
        check_variable(shape, "shape", "reshape", dtypes={"int32", "int64"})
        shape.stop_gradient = True
        inputs["Shape"] = [shape]
        dims = []
    else:
        if not isinstance(shape, (list, tuple)):
            raise InvalidArgumentError(
                f"reshape: shape must be a list/tuple or a Variable, got {type(shape).__name__}")
        helper = LayerHelper("reshape2", name=name)
        dims, tensors = int_tensor_inputs(helper, list(shape), "shape")
        if tensors is not None:
            inputs["ShapeTensor"] = tensors
        else:
            if dims.count(-1) > 1:
                raise InvalidArgumentError(f"reshape: at most one dim may be -1, got {dims}")
            if any(d < -1 for d in dims):
                raise InvalidArgumentError(f"reshape: dims must be >= -1, got {dims}")
    if actual_shape is not None:
        check_variable(actual_shape, "actual_shape", "reshape", dtypes={"int32", "int64"})
        inputs["Shape"] = [actual_shape]
    helper = LayerHelper("reshape2", name=name, act=act)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op("reshape2", inputs, {"Out": [out], "XShape": [x_shape]}, {"shape": dims})
    return helper.append_activation(out)


def transpose(x, perm, name=None):
    """x with its dims permuted by `perm` (transpose2)."""
    perm = _int_list(perm, "perm", "transpose")
    if isinstance(x, Variable) and sorted(perm) != list(_builtin_range(x.ndim)):
        raise InvalidArgumentError(
            f"transpose: perm {perm} is not a permutation of the {x.ndim} dims of {x.name} "
            f"{list(x.shape)}")
    return _with_xshape("transpose2", "transpose", x, {"axis": perm}, name)


def flatten(x, axis=1, name=None):
    """x as a matrix: dims before `axis` become rows, the rest columns (flatten2)."""
    if isinstance(x, Variable) and not 0 <= axis <= x.ndim:
        raise InvalidArgumentError(
            f"flatten: axis={axis} must be in [0, {x.ndim}] for {x.name} {list(x.shape)}")
    return _with_xshape("flatten2", "flatten", x, {"axis": int(axis)}, name)


def squeeze(input, axes, name=None):
    """input without the size-1 dims listed in `axes` (squeeze2); no axes drops every size-1
    dim. Naming a dim whose size is known and not 1 is an error, as in fluid 1.8."""
    axes = _int_list(axes, "axes", "squeeze")
    for a in axes if isinstance(input, Variable) else ():
        if -input.ndim <= a < input.ndim and input.shape[a] not in (1, -1):
            raise InvalidArgumentError(
                f"squeeze: axes entry {a} names a dim of size {input.shape[a]} in {input.name} "
                f"{list(input.shape)}; only size-1 dims can be squeezed: drop {a} from axes")
    return _with_xshape("squeeze2", "squeeze", input, {"axes": axes}, name)


def unsqueeze(input, axes, name=None):
    """input with size-1 dims inserted at `axes` (unsqueeze2)."""
    return _with_xshape("unsqueeze2", "unsqueeze", input,
                        {"axes": _int_list(axes, "axes", "unsqueeze")}, name)


def slice(input, axes, starts, ends):  # noqa: A001 - fluid's name
    """input[starts:ends] along each of `axes` (negative and out-of-range bounds as numpy);
    `starts` / `ends` may be 1-D int Variables or lists holding [1] int Variables. A negative
    entry in `axes` is an error naming the valid range: fluid 1.8 accepts one and silently
    slices nothing along it.

    >>> # slice(x [4, 6], axes=[1], starts=[1], ends=[-1])  -> x[:, 1:-1], shape [4, 4]
    """
    helper = LayerHelper("slice")
    check_variable(input, "input", "slice")
    axes = _int_list(axes, "axes", "slice")
    inputs: dict = {"Input": [input]}
    attrs: dict = {"axes": axes}
    flags = [1] * len(axes)
    for key, value in (("starts", starts), ("ends", ends)):
        slot = key.capitalize()
        if isinstance(value, Variable):
            check_variable(value, key, "slice", dtypes={"int32", "int64"})
            value.stop_gradient = True
            inputs[f"{slot}Tensor"] = [value]
            attrs[key] = [-1] * len(axes)
            flags = [-1] * len(axes)
            continue
        vals, tensors = int_tensor_inputs(helper, list(value) if isinstance(
            value, (list, tuple)) else [value], key)
        if tensors is not None:
            inputs[f"{slot}TensorList"] = tensors
            flags = [-1 if isinstance(v, Variable) else f for v, f in zip(value, flags)]
        attrs[key] = vals
    if not len(axes) == len(attrs["starts"]) == len(attrs["ends"]):
        raise InvalidArgumentError(
            f"slice: axes {axes}, starts {starts} and ends {ends} must have equal lengths")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("slice", inputs, {"Out": [out]}, attrs,
                     compat_attrs={"infer_flags": flags, "decrease_axis": []})
    return out


def gather(input, index, overwrite=True):
    """Rows of `input` picked by the int `index` (1-D or [N, 1]). For a repeated index,
    overwrite=True (fluid's default) passes back the gradient of its last occurrence only,
    as fluid 1.8 does; overwrite=False sums them all (the true gradient)."""
    helper = LayerHelper("gather")
    check_variable(input, "input", "gather")
    check_variable(index, "index", "gather", dtypes={"int32", "int64"})
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("gather", {"X": [input], "Index": [index]}, {"Out": [out]},
                     compat_attrs={"overwrite": bool(overwrite)})
    return out


def one_hot(input, depth, allow_out_of_range=False):
    """int64 ids [..., 1] -> float32 one-hot rows [..., depth] (an int or [1] int Variable)."""
    helper = LayerHelper("one_hot")
    check_variable(input, "input", "one_hot", dtypes={"int32", "int64"})
    inputs = {"X": [input]}
    if isinstance(depth, Variable):  # known at run time
        check_variable(depth, "depth", "one_hot", dtypes={"int32", "int64"})
        inputs["depth_tensor"], depth = [depth], -1
    elif isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
        raise InvalidArgumentError(
            f"one_hot: depth must be a positive int or a [1] int Variable, got {depth!r}")
    out = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    helper.append_op("one_hot", inputs, {"Out": [out]}, {"depth": depth},
                     compat_attrs={"allow_out_of_range": bool(allow_out_of_range)})
    return out
