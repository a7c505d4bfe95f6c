"""fluid.layers pooling builders: pool2d, pool3d, adaptive_pool2d, adaptive_pool3d (exported
through spmd.layers.conv).

>>> # y = pool2d(input=x, pool_size=2, pool_type="max", pool_stride=2)
>>> # g = pool2d(input=x, pool_size=0, pool_type="avg", global_pooling=True)  # size ignored
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .layout import FORMATS, channel_back, channel_first, check_format, nd_ints, resolve_padding

__all__ = ["adaptive_pool2d", "adaptive_pool3d", "pool2d", "pool3d"]


def _ksize(pool_size, global_pooling: bool, nd: int, where: str) -> list[int]:
    """fluid converts pool_size to nd ints even under global_pooling, where it is ignored (a
    ResNeXt program passes pool_size=0)."""
    if not global_pooling:
        if pool_size == -1:
            raise InvalidArgumentError(
                f"{where}: give pool_size (an int or {nd} ints) when global_pooling is False")
        if pool_size == 0 or (isinstance(pool_size, (list, tuple)) and 0 in pool_size):
            # fluid 1.8 runs a 0-sized window here and returns -FLT_MAX everywhere
            raise InvalidArgumentError(
                f"{where}: pool_size={pool_size!r} is a 0-sized window; pool_size=0 is only "
                f"meant with global_pooling=True (pass that, or a window size >= 1)")
        return nd_ints(pool_size, "pool_size", where, 1, nd)
    return nd_ints(pool_size, "pool_size", where, -1, nd)


def _pool_nd(nd, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling,
             use_cudnn, ceil_mode, name, exclusive, data_format):
    where = f"pool{nd}d"
    if pool_type not in ("max", "avg"):
        raise InvalidArgumentError(
            f"{where}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not isinstance(use_cudnn, bool):
        raise InvalidArgumentError(f"{where}: use_cudnn must be True or False, got "
                                   f"{use_cudnn!r}")
    check_format(input, data_format, where, nd)
    ksize = _ksize(pool_size, global_pooling, nd, where)
    strides = nd_ints(pool_stride, "pool_stride", where, 1, nd)
    paddings, algorithm = resolve_padding(pool_padding, data_format, where, nd)
    if algorithm == "VALID" and ceil_mode:
        raise InvalidArgumentError(f"{where}: pool_padding='VALID' needs ceil_mode=False")
    helper = LayerHelper(where, name=name)
    x = channel_first(helper, input, data_format)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(where, {"X": [x]}, {"Out": [out]},
                     {"pooling_type": pool_type, "ksize": ksize,
                      "global_pooling": bool(global_pooling), "strides": strides,
                      "paddings": paddings, "padding_algorithm": algorithm,
                      "ceil_mode": bool(ceil_mode), "exclusive": bool(exclusive),
                      "data_format": FORMATS[nd][0]},
                     compat_attrs={"use_cudnn": use_cudnn, "use_mkldnn": False})
    return channel_back(helper, out, data_format)


def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
           global_pooling=False, use_cudnn=True, ceil_mode=False, name=None, exclusive=True,
           data_format="NCHW"):
    """Max or average pooling over 2-D windows. `exclusive` (avg) divides by the number of
    non-padding elements; `global_pooling` pools each whole feature map (pool_size is then
    ignored); pool_padding takes the forms conv2d's padding takes.

    >>> # pool2d(x [N, 8, 16, 16], pool_size=2, pool_stride=2) -> [N, 8, 8, 8]
    """
    return _pool_nd(2, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling,
                    use_cudnn, ceil_mode, name, exclusive, data_format)


def pool3d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0,
           global_pooling=False, use_cudnn=True, ceil_mode=False, name=None, exclusive=True,
           data_format="NCDHW"):
    """Max or average pooling over 3-D windows (NCDHW or NDHWC), as pool2d.

    >>> # pool3d(x [N, 2, 4, 8, 8], pool_size=2, pool_stride=2) -> [N, 2, 2, 4, 4]
    """
    return _pool_nd(3, input, pool_size, pool_type, pool_stride, pool_padding, global_pooling,
                    use_cudnn, ceil_mode, name, exclusive, data_format)


def _reshape(helper, x, shape):
    out = helper.create_variable_for_type_inference(x.dtype)
    xshape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op("reshape2", {"X": [x]}, {"Out": [out], "XShape": [xshape]},
                     {"shape": list(shape)})
    return out


def _adaptive_nd(nd, input, pool_size, pool_type, require_index, name):
    where = f"adaptive_pool{nd}d"
    check_variable(input, "input", where)
    if pool_type not in ("max", "avg"):
        raise InvalidArgumentError(f"{where}: pool_type must be 'max' or 'avg', got "
                                   f"{pool_type!r}")
    if not isinstance(require_index, bool):
        raise InvalidArgumentError(f"{where}: require_index must be a bool")
    if pool_type == "avg" and require_index:
        raise InvalidArgumentError(f"{where}: require_index=True needs pool_type='max'")
    if input.ndim != nd + 2:
        raise InvalidArgumentError(f"{where}: input must be {nd + 2}-D channel-first, got "
                                   f"{list(input.shape)}")
    ksize = nd_ints(pool_size, "pool_size", where, 1, nd)
    attrs = {"ksize": ksize, "adaptive": True}
    if pool_type == "max":  # fluid builds every adaptive max pool on the with-index op
        helper = LayerHelper(f"max_pool{nd}d_with_index", name=name)
        out = helper.create_variable_for_type_inference(input.dtype)
        mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
        helper.append_op(f"max_pool{nd}d_with_index", {"X": [input]},
                         {"Out": [out], "Mask": [mask]}, attrs)
        return (out, mask) if require_index else out
    helper = LayerHelper(f"pool{nd}d", name=name)
    x = input
    if nd == 2:  # a depth-1 3-D adaptive pool: the same windows, one op that supports them
        x = _reshape(helper, input, [0, 0, 1, *input.shape[2:]])
        attrs["ksize"] = [1, *ksize]
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("pool3d", {"X": [x]}, {"Out": [out]},
                     {**attrs, "pooling_type": "avg", "data_format": "NCDHW"})
    return out if nd == 3 else _reshape(helper, out, [0, 0, *ksize])


def adaptive_pool2d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Adaptive pooling of NCHW input to an output of pool_size: output cell i of a dim covers
    input [floor(i*H/out), ceil((i+1)*H/out)). require_index=True (max only) also returns the
    flat index (h*W + w) of each maximum.

    >>> # adaptive_pool2d(x [N, 3, 7, 9], pool_size=[3, 3], pool_type="avg") -> [N, 3, 3, 3]
    """
    return _adaptive_nd(2, input, pool_size, pool_type, require_index, name)


def adaptive_pool3d(input, pool_size, pool_type="max", require_index=False, name=None):
    """Adaptive pooling of NCDHW input to an output of pool_size (see adaptive_pool2d).

    >>> # adaptive_pool3d(x [N, 3, 5, 7, 9], pool_size=2) -> [N, 3, 2, 2, 2]
    """
    return _adaptive_nd(3, input, pool_size, pool_type, require_index, name)

