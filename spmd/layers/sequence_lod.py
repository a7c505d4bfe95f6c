"""fluid.layers' sequence builders that move, cut, pad or relabel the rows of a LoD tensor
(fluid 1.8's sequence_concat, sequence_slice, sequence_pad, sequence_unpad, sequence_mask,
sequence_reshape, sequence_reverse, sequence_enumerate, sequence_scatter, lod_reset and
lod_append). spmd/layers/sequence.py re-exports them with the rest of the area.

>>> # padded, length = sequence_pad(emb, fluid.layers.assign(np.zeros(1, "float32")))
>>> # back = sequence_unpad(padded, length)  # emb again, with its LoD
"""
from __future__ import annotations

from collections.abc import Iterable

from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable

__all__ = ["lod_append", "lod_reset", "sequence_concat", "sequence_enumerate", "sequence_mask",
           "sequence_pad", "sequence_reshape", "sequence_reverse", "sequence_scatter",
           "sequence_slice", "sequence_unpad"]

_NUMBERS = {"float32", "float64", "int32", "int64"}
_INTS = {"int32", "int64"}


def _one_output(op: str, inputs: dict, attrs: dict | None = None, dtype=None, out="Out",
                name=None, stop_gradient=False):
    helper = LayerHelper(op, name=name)
    first = next(iter(inputs.values()))[0]
    var = helper.create_variable_for_type_inference(dtype or first.dtype,
                                                    stop_gradient=stop_gradient)
    helper.append_op(op, inputs, {out: [var]}, attrs or {})
    return var


def sequence_concat(input, name=None):
    """Concatenate LoD tensors sequence by sequence: output sequence i is input[0]'s
    sequence i, then input[1]'s, ... (all with one level and the same number of sequences).

    >>> # sequence_concat([x LoD [[0, 2, 3]], y LoD [[0, 1, 3]]])  # LoD [[0, 3, 6]]
    """
    if not isinstance(input, (list, tuple)) or not input:
        raise InvalidArgumentError(
            f"sequence_concat: input must be a non-empty list of LoD tensors, got {input!r}")
    for i, x in enumerate(input):
        check_variable(x, f"input[{i}]", "sequence_concat", dtypes={"int64", "float32",
                                                                      "float64"})
    return _one_output("sequence_concat", {"X": list(input)}, name=name)


def sequence_slice(input, offset, length, name=None):
    """Cut each sequence: rows offset[i] .. offset[i] + length[i] of sequence i (offset and
    length are int [num_sequences, 1] tensors).

    >>> # sequence_slice(x LoD [[0, 3, 5]], offset [[0], [1]], length [[2], [1]])  # [[2, 1]]
    """
    check_variable(input, "input", "sequence_slice", dtypes=_NUMBERS)
    check_variable(offset, "offset", "sequence_slice", dtypes=_INTS)
    check_variable(length, "length", "sequence_slice", dtypes=_INTS)
    offset.stop_gradient = True
    length.stop_gradient = True
    return _one_output("sequence_slice", {"X": [input], "Offset": [offset],
                                          "Length": [length]}, name=name)


def sequence_pad(x, pad_value, maxlen=None, name=None):
    """Pad every sequence of x ([rows, ...], one level of LoD) to one length with pad_value
    (one number, or one row): returns (Out [num_sequences, maxlen, ...], Length int64
    [num_sequences]). maxlen None pads to the longest sequence.

    >>> # out, length = sequence_pad(x, fluid.layers.assign(np.array([0.0], "float32")))
    """
    check_variable(x, "x", "sequence_pad", dtypes=_NUMBERS)
    check_variable(pad_value, "pad_value", "sequence_pad", dtypes=_NUMBERS)
    helper = LayerHelper("sequence_pad", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    pad_value.stop_gradient = True
    helper.append_op("sequence_pad", {"X": [x], "PadValue": [pad_value]},
                     {"Out": [out], "Length": [length]},
                     {"padded_length": -1 if maxlen is None else maxlen})
    return out, length


def sequence_unpad(x, length, name=None):
    """The inverse of sequence_pad: the first length[i] rows of x[i], as a LoD tensor.

    >>> # sequence_unpad(padded [2, 4, 8], length [2, 3])  # [5, 8], LoD [[0, 2, 5]]
    """
    check_variable(x, "x", "sequence_unpad", dtypes=_NUMBERS)
    check_variable(length, "length", "sequence_unpad", dtypes={"int64"})
    length.stop_gradient = True
    return _one_output("sequence_unpad", {"X": [x], "Length": [length]}, name=name)


def sequence_mask(x, maxlen=None, dtype="int64", name=None):
    """mask[..., j] = j < x[...] for j < maxlen (an int, a Variable, or None for max(x)).

    >>> # sequence_mask(lengths [3, 1], maxlen=4)  # [[1, 1, 1, 0], [1, 0, 0, 0]]
    """
    check_variable(x, "x", "sequence_mask", dtypes=_INTS)
    inputs = {"X": [x]}
    attrs = {"out_dtype": dtype}
    if isinstance(maxlen, Variable):
        inputs["MaxLenTensor"] = [maxlen]
    elif maxlen is not None:
        attrs["maxlen"] = maxlen
    return _one_output("sequence_mask", inputs, attrs, dtype=dtype, out="Y", name=name,
                       stop_gradient=True)


def sequence_reshape(input, new_dim):
    """Reshape each sequence's rows to width new_dim (length * width must divide by it).

    >>> # sequence_reshape(x [6, 2] LoD [[0, 2, 6]], new_dim=4)  # [3, 4], LoD [[0, 1, 3]]
    """
    check_variable(input, "input", "sequence_reshape", dtypes=_NUMBERS)
    return _one_output("sequence_reshape", {"X": [input]}, {"new_dim": new_dim})


def sequence_reverse(x, name=None):
    """Reverse the rows of each sequence; the LoD stays.

    >>> # sequence_reverse(x LoD [[0, 2, 5]])  # rows 1, 0, 4, 3, 2
    """
    check_variable(x, "x", "sequence_reverse", dtypes=_NUMBERS | {"int8"})
    return _one_output("sequence_reverse", {"X": [x]}, out="Y", name=name)


def sequence_enumerate(input, win_size, pad_value=0, name=None):
    """Every window of win_size ids starting at each row, inside its sequence, padded with
    pad_value: [rows, 1] ids -> [rows, win_size].

    >>> # sequence_enumerate(ids [[1], [2], [3]] LoD [[0, 3]], 2)  # [[1, 2], [2, 3], [3, 0]]
    """
    check_variable(input, "input", "sequence_enumerate", dtypes=_INTS)
    return _one_output("sequence_enumerate", {"X": [input]},
                       {"win_size": win_size, "pad_value": pad_value}, name=name,
                       stop_gradient=True)


def sequence_scatter(input, index, updates, name=None):
    """out = input, plus updates[k] added at column index[k] of row i for every k in
    sequence i of index (index and updates share one level of LoD).

    >>> # sequence_scatter(x [3, 6], index LoD [[0, 3, 8, 12]], updates same LoD)
    """
    check_variable(input, "input", "sequence_scatter", dtypes=_NUMBERS)
    check_variable(index, "index", "sequence_scatter", dtypes=_INTS)
    check_variable(updates, "updates", "sequence_scatter", dtypes=_NUMBERS)
    return _one_output("sequence_scatter", {"X": [input], "Ids": [index],
                                            "Updates": [updates]}, name=name)


def lod_reset(x, y=None, target_lod=None):
    """x with a new LoD: y's LoD (y with LoD), y's data as offsets (y int, without LoD), or
    target_lod (a list of offsets).

    >>> # lod_reset(x [6, 2], target_lod=[0, 2, 6])  # LoD [[0, 2, 6]]
    """
    check_variable(x, "x", "lod_reset", dtypes=_NUMBERS)
    if y is not None:
        check_variable(y, "y", "lod_reset")
        return _one_output("lod_reset", {"X": [x], "Y": [y]})
    if target_lod is not None:
        return _one_output("lod_reset", {"X": [x]}, {"target_lod": list(target_lod)})
    raise InvalidArgumentError("lod_reset: give y (a Variable) or target_lod (a list of "
                               "offsets); both are None")


def lod_append(x, level):
    """x with one more LoD level below its own: `level` (a list of offsets, or a Variable:
    its data as offsets, or its LoD when it carries one).

    >>> # lod_append(x LoD [[0, 2, 3]], [0, 1, 3, 4])  # LoD [[0, 2, 3], [0, 1, 3, 4]]
    """
    if x is None:
        raise InvalidArgumentError("lod_append: x is None; give a Variable")
    if not isinstance(level, (Iterable, Variable)):
        raise InvalidArgumentError(
            f"lod_append: level must be a list, a tuple or a Variable, got {level!r}")
    check_variable(x, "x", "lod_append", dtypes=_NUMBERS)
    inputs, attrs = {"X": [x]}, {"append": True}
    if isinstance(level, Variable):
        inputs["Y"] = [level]
    else:
        attrs["target_lod"] = list(level)
    return _one_output("lod_reset", inputs, attrs)
