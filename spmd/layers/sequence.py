"""fluid.layers' sequence builders (fluid 1.8's fluid.layers.sequence_lod): ops on the
sequences of a LoD tensor (spmd/core/lod.py).

>>> # words = fluid.data("words", [None, 1], "int64", lod_level=1)
>>> # emb = fluid.embedding(words, [vocab, 32]); pooled = sequence_pool(emb, "sum")
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from ..ops.sequence import POOL_TYPES
from .helper import LayerHelper, check_variable

__all__ = ["sequence_first_step", "sequence_last_step", "sequence_pool"]

_FLOATS = {"float32", "float64"}


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0):
    """Pool each sequence of `input` (a LoD tensor) into one row: pool_type 'sum', 'average',
    'sqrt' (sum / sqrt(length)), 'max', 'first' or 'last'. An empty sequence gives a row of
    `pad_value`. The result carries the LoD levels above the pooled one (none for
    lod_level 1).

    >>> # sequence_pool(emb, "average")  # [num_sequences, emb_dim]
    """
    where = "sequence_pool"
    check_variable(input, "input", where, dtypes=_FLOATS)
    if not isinstance(pool_type, str) or pool_type.upper() not in POOL_TYPES:
        raise InvalidArgumentError(
            f"{where}: pool_type must be one of {[t.lower() for t in POOL_TYPES]}, got "
            f"{pool_type!r}")
    helper = LayerHelper("sequence_pool")
    out = helper.create_variable_for_type_inference(input.dtype)
    max_index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("sequence_pool", {"X": [input]}, {"Out": [out], "MaxIndex": [max_index]},
                     {"pooltype": pool_type.upper(), "is_test": is_test,
                      "pad_value": pad_value})
    return out


def sequence_first_step(input):
    """The first row of each sequence of `input` (sequence_pool 'first').

    >>> # sequence_first_step(emb)  # [num_sequences, emb_dim]
    """
    return sequence_pool(input, "first")


def sequence_last_step(input):
    """The last row of each sequence of `input` (sequence_pool 'last').

    >>> # sequence_last_step(emb)  # [num_sequences, emb_dim]
    """
    return sequence_pool(input, "last")
