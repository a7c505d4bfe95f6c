"""The data formats and the size and padding arguments of fluid's convolution and pooling
builders (conv.py, pool.py, functional.py), and the transposes around a channel-last input.

The kernels work channel-first: an NHWC / NDHWC input is transposed to channel-first before the
op and its output back after it (channel_first, channel_back; norm.py's builders use them too).
"""
from __future__ import annotations

import numbers

from ..errors import InvalidArgumentError
from .helper import check_variable

_FLOATS = {"float16", "float32", "float64"}
FORMATS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def nd_ints(value, arg: str, where: str, minimum: int, nd: int = 2) -> list[int]:
    """An int or a list of nd ints, as fluid's convert_to_list(value, nd)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * nd
    if len(values) != nd or not all(is_int(v) and v >= minimum for v in values):
        raise InvalidArgumentError(
            f"{where}: {arg} must be an int or {nd} ints >= {minimum}, got {value!r}")
    return [int(v) for v in values]


def resolve_padding(padding, data_format: str, where: str, nd: int = 2) -> tuple[list[int], str]:
    """fluid's padding forms -> (paddings, padding_algorithm): "SAME"/"VALID"; p; one int per
    dim; [before, after] per dim; or one pair per dim of the data format (batch and channel
    pairs [0, 0])."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise InvalidArgumentError(
                f"{where}: padding must be 'SAME', 'VALID' or ints, got {padding!r}")
        return [0] * nd, algo
    if isinstance(padding, (list, tuple)) and len(padding) == nd + 2 and all(
            isinstance(p, (list, tuple)) for p in padding):
        last = data_format.endswith("C")
        spatial = padding[1:nd + 1] if last else padding[2:]
        batch_channel = [padding[0], padding[-1] if last else padding[1]]
        if any(list(p) != [0, 0] for p in batch_channel):
            raise InvalidArgumentError(
                f"{where}: padding of the batch and channel dims must be [0, 0], got {padding}")
        padding = [v for pair in spatial for v in pair]
    values = list(padding) if isinstance(padding, (list, tuple)) else [padding] * nd
    if len(values) not in (nd, 2 * nd) or not all(is_int(v) and v >= 0 for v in values):
        raise InvalidArgumentError(
            f"{where}: padding must be an int >= 0, {nd} or {2 * nd} ints, or 'SAME'/'VALID'; "
            f"got {padding!r}")
    values = [int(v) for v in values]
    if len(values) == 2 * nd and values[::2] == values[1::2]:
        values = values[::2]  # symmetric: fluid stores one value per dim
    return values, "EXPLICIT"


def check_format(input, data_format: str, where: str, nd: int = 2):
    check_variable(input, "input", where, dtypes=_FLOATS)
    if data_format not in FORMATS[nd]:
        raise InvalidArgumentError(
            f"{where}: data_format must be one of {list(FORMATS[nd])}, got {data_format!r}")
    if input.ndim != nd + 2:
        raise InvalidArgumentError(
            f"{where}: input must be {nd + 2}-D ({data_format}), got {input.name} of shape "
            f"{list(input.shape)}")


def _transpose(helper, x, perm):
    out = helper.create_variable_for_type_inference(x.dtype)
    xshape = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op("transpose2", {"X": [x]}, {"Out": [out], "XShape": [xshape]},
                     {"axis": list(perm)})
    return out


def channel_first(helper, x, data_format: str):
    """x laid out channel-first for the op (a transpose when data_format is channel-last)."""
    if not data_format.endswith("C"):
        return x
    return _transpose(helper, x, [0, x.ndim - 1, *range(1, x.ndim - 1)])


def channel_back(helper, y, data_format: str):
    """The op's channel-first output back in the caller's data_format."""
    if not data_format.endswith("C"):
        return y
    return _transpose(helper, y, [0, *range(2, y.ndim), 1])
