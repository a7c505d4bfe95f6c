"""fluid.layers: gathering, scattering and finding elements by index; beam-search backtrace
(gather_tree) and similarity focus masks.

>>> # out = gather_nd(x, index)   # x [3, 4], index [2, 2] (int) -> out [2]
"""
from __future__ import annotations

from ..core.dtypes import convert_dtype
from ..errors import InvalidArgumentError
from .helper import LayerHelper, check_variable
from .tensor import fill_constant, slice

__all__ = [
    "gather_nd", "gather_tree", "hash", "index_sample", "index_select", "multiplex", "nonzero",
    "scatter", "scatter_nd", "scatter_nd_add", "shard_index", "similarity_focus", "unique",
    "unique_with_counts", "where",
]

_IDS = {"int32", "int64"}


def _op(layer, op, inputs, attrs=None, dtype=None, stop_gradient=False, name=None):
    helper = LayerHelper(layer, name=name)
    first = next(iter(inputs.values()))[0]
    out = helper.create_variable_for_type_inference(dtype or first.dtype,
                                                    stop_gradient=stop_gradient)
    helper.append_op(op, inputs, {"Out": [out]}, attrs or {})
    return out


def gather_nd(input, index, name=None):
    """input at the coordinates in index's last dim: out = input[index[..., 0], ...].

    >>> # gather_nd(x [3, 4], index [[0, 1], [2, 3]])  -> [x[0, 1], x[2, 3]]
    """
    check_variable(input, "input", "gather_nd")
    check_variable(index, "index", "gather_nd", dtypes=_IDS)
    return _op("gather_nd", "gather_nd", {"X": [input], "Index": [index]}, name=name)


def index_sample(x, index):
    """out[i, j] = x[i, index[i, j]] for 2-D x and index.

    >>> # index_sample(x [2, 4], index [2, 3])  -> [2, 3]
    """
    check_variable(x, "x", "index_sample")
    check_variable(index, "index", "index_sample", dtypes=_IDS)
    return _op("index_sample", "index_sample", {"X": [x], "Index": [index]})


def index_select(input, index, dim=0):
    """The entries of input at positions `index` (1-D int) along `dim`.

    >>> # index_select(x [3, 4], index [0, 2], dim=1)  -> [3, 2]
    """
    check_variable(input, "input", "index_select")
    check_variable(index, "index", "index_select", dtypes=_IDS)
    return _op("index_select", "index_select", {"X": [input], "Index": [index]},
               {"dim": int(dim)})


def multiplex(inputs, index):
    """Row i of the output is row i of inputs[index[i]] (index: [batch, 1] int).

    >>> # multiplex([a, b], index)   # a, b [N, 3], index [N, 1]
    """
    if not isinstance(inputs, list) or len(inputs) < 2:
        raise InvalidArgumentError("multiplex: inputs must be a list of at least 2 Variables")
    for v in inputs:
        check_variable(v, "inputs", "multiplex")
    check_variable(index, "index", "multiplex", dtypes=_IDS)
    return _op("multiplex", "multiplex", {"X": inputs, "Ids": [index]})


def where(condition):
    """The coordinates of the true entries of `condition`, an int64 [count, rank] Variable.

    >>> # where(cond [2, 2] = [[True, False], [False, True]])  -> [[0, 0], [1, 1]]
    """
    check_variable(condition, "condition", "where")
    return _op("where_index", "where_index", {"Condition": [condition]}, dtype="int64",
               stop_gradient=True)


def nonzero(input, as_tuple=False):
    """The coordinates of the nonzero entries of input: [count, rank] int64, or with as_tuple
    one [count, 1] Variable per dim.

    >>> # rows, cols = nonzero(x, as_tuple=True)
    """
    out = where(input)
    if not as_tuple:
        return out
    rank = input.ndim
    if rank == 1:
        return (out,)
    return tuple(slice(out, axes=[1], starts=[i], ends=[i + 1]) for i in range(rank))


def scatter(input, index, updates, name=None, overwrite=True):
    """input with the rows at `index` replaced by `updates` (overwrite=True) or, with
    overwrite=False, set to the sum of the updates aimed at them.

    Gradient: the rows of `input` at `index` get none (they are replaced in both modes);
    fluid 1.8 passes the whole output gradient back to `input`, rows at `index` included,
    which is not the gradient of its forward: spmd gives the true one.

    >>> # scatter(x [3, 2], index [1], updates [1, 2])
    """
    check_variable(input, "input", "scatter")
    check_variable(index, "index", "scatter", dtypes=_IDS)
    check_variable(updates, "updates", "scatter")
    return _op("scatter", "scatter", {"X": [input], "Ids": [index], "Updates": [updates]},
               {"overwrite": bool(overwrite)}, name=name)


def scatter_nd_add(ref, index, updates, name=None):
    """ref with `updates` added at the coordinates in index's last dim (repeats add up).

    >>> # scatter_nd_add(x [3, 4], index [[1, 1]], updates [1.0])
    """
    check_variable(ref, "ref", "scatter_nd_add")
    check_variable(index, "index", "scatter_nd_add", dtypes=_IDS)
    check_variable(updates, "updates", "scatter_nd_add")
    return _op("scatter_nd_add", "scatter_nd_add",
               {"X": [ref], "Index": [index], "Updates": [updates]}, name=name)


def scatter_nd(index, updates, shape, name=None):
    """scatter_nd_add into zeros of `shape`.

    >>> # scatter_nd(index [[1], [1]], updates [[1, 1], [2, 2]], shape=[3, 2])
    """
    check_variable(updates, "updates", "scatter_nd")
    zeros = fill_constant(shape, updates.dtype, 0.0)
    return scatter_nd_add(zeros, index, updates, name)


def _unique(layer, x, dtype, outs):
    check_variable(x, "x", layer)
    dtype = convert_dtype(dtype)
    if dtype not in _IDS:
        raise InvalidArgumentError(f"{layer}: dtype must be int32 or int64, got {dtype}")
    if x.ndim != 1:
        raise InvalidArgumentError(f"{layer}: x must be 1-D, got {x.name} {list(x.shape)}")
    helper = LayerHelper(layer)
    made = {"Out": helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)}
    for slot in outs:
        made[slot] = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(layer, {"X": [x]}, {k: [v] for k, v in made.items()}, {"dtype": dtype})
    return made


def unique(x, dtype="int32"):
    """(the distinct values of 1-D x in order of first appearance, the index of each x entry
    among them).

    >>> # out, index = unique(x [2, 3, 3, 1, 5, 3])  -> [2, 3, 1, 5], [0, 1, 1, 2, 3, 1]
    """
    made = _unique("unique", x, dtype, ["Index"])
    return made["Out"], made["Index"]


def unique_with_counts(x, dtype="int32"):
    """unique() plus how often each distinct value occurs.

    >>> # out, index, count = unique_with_counts(x)
    """
    made = _unique("unique_with_counts", x, dtype, ["Index", "Count"])
    return made["Out"], made["Index"], made["Count"]


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):
    """Ids in [0, index_num) split into `nshards` ranges: an id in shard `shard_id`'s range
    becomes its offset there, every other id `ignore_value`.

    >>> # shard_index(ids [[1], [6]], index_num=8, nshards=2, shard_id=1)  -> [[-1], [2]]
    """
    check_variable(input, "input", "shard_index", dtypes=_IDS)
    if not 0 <= shard_id < nshards:
        raise InvalidArgumentError(
            f"shard_index: shard_id ({shard_id}) must be in [0, {nshards})")
    return _op("shard_index", "shard_index", {"X": [input]},
               {"index_num": int(index_num), "nshards": int(nshards),
                "shard_id": int(shard_id), "ignore_value": int(ignore_value)},
               stop_gradient=True)


def hash(input, hash_size, num_hash=1, name=None):  # noqa: A001 - fluid's name
    """Each row of int ids hashed `num_hash` times (XXH64, seeds 0..num_hash-1) into
    [0, hash_size): [N, k] -> [N, num_hash, 1] int64.

    >>> # hash(ids [N, 1], hash_size=1000, num_hash=2)  -> [N, 2, 1]
    """
    check_variable(input, "input", "hash", dtypes=_IDS)
    return _op("hash", "hash", {"X": [input]},
               {"num_hash": int(num_hash), "mod_by": int(hash_size)}, dtype="int64",
               stop_gradient=True, name=name)


def gather_tree(ids, parents):
    """The full sequences of a beam search: from the last step back to the first, each beam
    follows its parents and collects the id chosen at each step. ids and parents are int
    Variables of shape [max_time, batch_size, beam_size]; the result has ids' shape and dtype.

    >>> # ids     = [[[2, 2], [6, 1]], [[3, 9], [6, 1]], [[0, 1], [9, 0]]]
    >>> # parents = [[[0, 0], [1, 1]], [[1, 0], [1, 0]], [[0, 0], [0, 1]]]
    >>> # gather_tree(ids, parents) -> [[[2, 2], [1, 6]], [[3, 3], [6, 1]], [[0, 1], [9, 0]]]
    """
    check_variable(ids, "ids", "gather_tree", dtypes=_IDS)
    check_variable(parents, "parents", "gather_tree", dtypes=_IDS)
    return _op("gather_tree", "gather_tree", {"Ids": [ids], "Parents": [parents]},
               stop_gradient=True)


def similarity_focus(input, axis, indexes, name=None):
    """A 0/1 mask shaped like the 4-D `input`: for each sample and each index in `indexes`,
    the slice input[:, ..index at `axis`..] (a 2-D matrix) marks its largest value, then the
    largest one in a free row and a free column, and so on; the marks of all indexes are
    OR-ed and broadcast back along `axis` (1, 2 or 3).

    >>> # similarity_focus(x [N, 3, 2, 2], axis=1, indexes=[0])  -> [N, 3, 2, 2] of 0 and 1
    """
    check_variable(input, "input", "similarity_focus", dtypes={"float32", "float64"})
    if isinstance(axis, bool) or not isinstance(axis, int) or axis not in (1, 2, 3):
        raise InvalidArgumentError(f"similarity_focus: axis must be 1, 2 or 3, got {axis!r}")
    if not isinstance(indexes, list) or not indexes:
        raise InvalidArgumentError(
            f"similarity_focus: indexes must be a non-empty list of ints, got {indexes!r}")
    return _op("similarity_focus", "similarity_focus", {"X": [input]},
               {"axis": axis, "indexes": indexes}, name=name)
