"""Feeds as fluid's executor takes them: each fed array checked against its variable (shape,
dtype) before any op runs, names the program lacks dropped with fluid's warning, a feed split
over places, and a LoD fed to a variable declared without one carried to the ops."""
from __future__ import annotations

import warnings

import numpy as np

from ..core.lod import LoDTensor, LoDTensorArray, check_lod, lod_key, split_by_sequences
from ..errors import FeedError


def _close_names(name, block) -> list:
    """The program's names closest to a misspelt feed name, for its error (difflib is
    imported here, off the start-up path: only a bad feed needs it)."""
    import difflib

    return difflib.get_close_matches(name, block.vars, n=3)


def drop_unknown_feeds(block, feed):
    """The feed without the names `block` (the program's global block) does not declare, a
    warning for each, as fluid 1.8's Executor: it adds no feed op for such a name (a variable
    pruned away or never declared) and runs on. A list feed holds one dict per place."""
    if isinstance(feed, (list, tuple)):
        return [drop_unknown_feeds(block, f) if isinstance(f, dict) else f for f in feed]
    if not isinstance(feed, dict) or all(block.has_var(name) for name in feed):
        return feed
    kept = {}
    for name, value in feed.items():
        if block.has_var(name):
            kept[name] = value
            continue
        close = _close_names(name, block)
        warnings.warn(f"The variable {name} is not found in program. It is not declared or is "
                      "pruned; its feed is ignored"
                      + (f" (did you mean {close}?)" if close else ""), stacklevel=4)
    return kept


def unset_value(var):
    """What a run reads for `var` when neither a feed nor the scope holds it, or None (then
    it is an error): a tensor array is an empty array, as fluid 1.8's executor creates every
    variable of the program in the scope before the first op (a DynamicRNN's step writes
    into an array declared outside its loop)."""
    return LoDTensorArray() if var is not None and var.type == "LOD_TENSOR_ARRAY" else None


def check_feed_names(block, feed: dict, needed: list[str]):
    """Unknown names and missing data feeds, each named, with what would fix it."""
    for name in feed:
        if not block.has_var(name):
            close = _close_names(name, block)
            raise FeedError(
                f"feed '{name}' is not a variable of the program"
                + (f"; did you mean {close}?" if close else "")
                + f" (data variables: {sorted(v.name for v in block.vars.values() if v.is_data)})"
            )
    missing = [n for n in needed if n not in feed]
    if missing:
        raise FeedError(
            f"variable(s) {missing} must be fed: the program reads them before any op writes "
            f"them; add them to feed= (fed: {sorted(feed)})"
        )


def convert_feed(var, value, xp, into: dict, tracked=frozenset()) -> None:
    """Put `value` into `into` as a contiguous array of `var`'s dtype and shape, or raise
    FeedError. A LoD variable (in `tracked`) also gets its LoD under lod_key(name): the fed
    LoDTensor's, checked against its rows, or None."""
    lod = None
    if isinstance(value, LoDTensor):
        lod, value = value.lod_value, value.array
        if value is None:
            raise FeedError(f"feed '{var.name}': the LoDTensor holds no data; call "
                            f"set(array, place) on it first")
    # fluid checks no batch size for a LoD feed: its rows are not its samples
    sequences_fed = lod is not None
    if lod is not None and var.name not in tracked:
        # a variable declared with lod_level=0 (no op of the program reads its sequences):
        # fluid takes the LoDTensor and computes on its rows, as spmd does; the LoD is not
        # carried on (declare lod_level=1 for ops to see the sequences)
        lod = None
    array = _converted(var, value, xp, sequences_fed)
    into[var.name] = array
    if var.name in tracked:
        check_lod(lod, int(array.shape[0]) if array.ndim else 1, f"feed '{var.name}'",
                  FeedError)
        into[lod_key(var.name)] = lod


def _scalar_as_row(value, dtype=None):
    """A Python or numpy scalar fed is a tensor of one element, shape [1], as fluid 1.8's
    executor._as_lodtensor makes it (np.array([value]) in the variable's dtype)."""
    if np.isscalar(value) and not isinstance(value, (str, bytes)):
        row = np.array([value])
        return row if dtype is None else row.astype(dtype)
    return value


def _converted(var, value, xp, sequences_fed=False):
    value = _scalar_as_row(value, var.dtype)
    if hasattr(value, "__array__") and not isinstance(value, np.ndarray) and xp is np:
        value = np.asarray(value)
    if not hasattr(value, "dtype"):  # python scalars and lists: take the variable's dtype
        try:
            value = np.asarray(value, dtype=var.dtype)
        except (TypeError, ValueError) as e:
            raise FeedError(
                f"feed '{var.name}': cannot convert to {var.dtype} array: {e}") from None
    if (np.dtype(value.dtype).name != var.dtype and not var.need_check_feed
            and np.can_cast(value.dtype, var.dtype, "same_kind")):
        # fluid.layers.data (need_check_feed False): fluid 1.8 checks no dtype and runs the
        # ops on what was fed (float64 or int32 rows into a float32 variable); spmd's
        # program is typed, so the rows are converted to the variable's dtype (float to
        # int, which would drop fractions, is still refused)
        value = value.astype(var.dtype)
    if np.dtype(value.dtype).name != var.dtype:
        got_dtype = np.dtype(value.dtype).name
        raise _fluid_worded(
            f"The data type of fed Variable {var.name!r} must be {var.dtype!r}, but received "
            f"{got_dtype!r}",
            f"feed '{var.name}': expected dtype {var.dtype}, got {got_dtype}; convert it with "
            f".astype('{var.dtype}')")
    expected = var.shape
    got = tuple(value.shape)
    if expected and expected[0] < 0 and got and got[0] == 0:
        raise _empty_batch(var.name, got)
    # a variable of fluid.layers.data (need_check_feed False) takes any shape, as in fluid
    if var.shape and var.need_check_feed and (len(got) != len(expected) or any(
            e >= 0 and e != g for i, (e, g) in enumerate(zip(expected, got))
            if i > 0 or not sequences_fed)):
        shown = "[" + ", ".join("None" if d < 0 else str(d) for d in expected) + "]"
        dims = tuple(int(d) for d in expected)
        raise _fluid_worded(
            f"The fed Variable {var.name!r} should have dimensions = {len(dims)}, shape = "
            f"{dims!r}, but received fed shape {[int(g) for g in got]!r} on each device",
            f"feed '{var.name}': expected shape {shown} (None = any size), got {list(got)}")
    return xp.ascontiguousarray(value)


def _fluid_worded(fluid_text: str, spmd_text: str) -> FeedError:
    """A FeedError whose message is fluid 1.8's own sentence (programs and Paddle's tests
    compare it whole), with spmd's wording, which says the fix, as a note (shown with the
    traceback)."""
    error = FeedError(fluid_text)
    error.add_note(spmd_text)
    return error


def _as_array(name: str, value, tag: str):
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise FeedError(f"{tag}feed '{name}': cannot convert to an array to split it over the "
                        f"places: {e}; feed a numpy array, one row per sample") from None


def _empty_batch(name: str, shape, tag: str = "") -> FeedError:
    return FeedError(
        f"{tag}feed '{name}': the batch is empty (0 rows, shape {list(shape)}); every place "
        f"needs at least one sample: skip empty batches in the reader, or drop the last "
        f"uneven batch (paddle.batch(..., drop_last=True))")


def split_feed(feed, num_places: int, tag: str = "", replicated=frozenset(),
               every_place_because: str | None = "a training program runs on every place"
               ) -> list[dict]:
    """fluid's data-parallel feeding: a dict is split along dim 0 over the places (the
    remainder going to the later places); a list of per-place dicts is used as it is. A name in
    `replicated` (a persistable variable, such as a learning rate fed each step) of one row is
    given whole to every place, as fluid's ParallelExecutor does (with more rows it is split).

    `every_place_because` None (a program without a backward pass or collectives): as in
    fluid 1.8, a list of k < num_places dicts, or a dict batch of k < num_places rows, feeds
    only the first k places (a DataLoader's short last batch with drop_last=False); the result
    then holds k dicts. Otherwise that is a FeedError giving this reason.

    >>> [len(s["x"]) for s in split_feed({"x": np.zeros((5, 2))}, 2)]
    [2, 3]
    >>> [s["lr"].shape for s in split_feed({"lr": np.ones(1)}, 2, replicated={"lr"})]
    [(1,), (1,)]
    """
    if isinstance(feed, (list, tuple)):
        if len(feed) > num_places or not feed:
            raise FeedError(
                f"{tag}a list feed needs one dict per place: {num_places} place(s), got "
                f"{len(feed)} dict(s)")
        if len(feed) < num_places and every_place_because:
            raise _every_place(tag, len(feed), num_places, every_place_because)
        return [dict(f) for f in feed]
    if num_places == 1:
        return [feed]
    arrays = {name: _splittable(name, value, tag) for name, value in feed.items()}
    # as fluid 1.8's ParallelExecutor, a persistable feed goes whole to every place when it
    # has one row (or none: a scalar); with more it is split as the others are
    replicated = {n for n in replicated if n in arrays and not isinstance(arrays[n], LoDTensor)
                  and (arrays[n].ndim == 0 or arrays[n].shape[0] == 1)}
    if every_place_because is None:  # a short batch feeds the first places only, one row each
        num_places = _places_fed(arrays, num_places, replicated, tag)
    shards: list[dict] = [{} for _ in range(num_places)]
    for name, array in arrays.items():
        if name in replicated:
            for shard in shards:
                shard[name] = array
            continue
        if isinstance(array, LoDTensor):  # dealt out by whole sequences
            _deal_sequences(name, array, shards, tag, every_place_because)
            continue
        if array.ndim == 0:
            raise FeedError(
                f"{tag}feed '{name}' is a scalar (shape []), so it cannot be split over "
                f"{num_places} places: give it a batch dimension, or make it a persistable "
                f"variable, which every place gets whole")
        n = array.shape[0]
        if n == 0:
            raise _empty_batch(name, array.shape, tag)
        if n < num_places:
            raise FeedError(
                f"{tag}feed '{name}' has a batch of {n} but there are {num_places} places, "
                f"and {every_place_because}, each with at least one sample; feed a batch of "
                f"at least {num_places} (drop_last=True in paddle.batch / DataLoader drops a "
                f"short last batch) or use fewer places (CPU_NUM / places=)")
        base, extra = divmod(n, num_places)
        start = 0
        for i in range(num_places):
            size = base + (1 if i >= num_places - extra else 0)
            shards[i][name] = array[start:start + size]
            start += size
    return shards


def _splittable(name: str, value, tag: str):
    """A feed value as split_feed deals it out: an array, or a LoDTensor that has a LoD."""
    if isinstance(value, LoDTensor):
        return value if value.lod_value is not None else value.array
    value = _scalar_as_row(value)
    return value if hasattr(value, "shape") else _as_array(name, value, tag)


def _deal_sequences(name: str, tensor: LoDTensor, shards: list, tag: str, because) -> None:
    """A LoD feed split over the places by top-level sequences (the remainder going to the
    later places, as rows of a dense feed do), so no sequence is cut in two."""
    count, places = tensor.lod_value[0].size - 1, len(shards)
    if count < places:
        raise FeedError(
            f"{tag}feed '{name}' holds {count} sequence(s) but there are {places} places, "
            f"and {because}, each with at least one sequence; feed at least {places} "
            f"sequences per batch or use fewer places")
    base, extra = divmod(count, places)
    counts = [base + (1 if i >= places - extra else 0) for i in range(places)]
    for shard, piece in zip(shards, split_by_sequences(tensor, counts)):
        shard[name] = piece


def _every_place(tag: str, got: int, num_places: int, because: str) -> FeedError:
    return FeedError(
        f"{tag}a list feed needs one dict per place: {num_places} place(s), got {got} "
        f"dict(s), and {because} (fewer dicts are accepted only for programs without a "
        f"backward pass or collectives, as in fluid). A DataLoader gives fewer at the end of "
        f"an epoch when its batches do not fill every place: set drop_last=True there")


def _places_fed(arrays: dict, num_places: int, replicated, tag: str) -> int:
    """How many places a dict batch feeds when it may feed fewer than all: one row each
    while the batch is shorter than the places, and every input must then be as short."""
    rows = {n: (a.lod_value[0].size - 1 if isinstance(a, LoDTensor) else a.shape[0])
            for n, a in arrays.items()
            if n not in replicated and (isinstance(a, LoDTensor) or a.ndim > 0)}
    if not rows or min(rows.values()) >= num_places:
        return num_places
    if len(set(rows.values())) > 1:
        raise FeedError(
            f"{tag}the feeds have different batch sizes {rows} and the smallest is below the "
            f"{num_places} places, so they cannot be dealt out: feed every variable the same "
            f"number of rows")
    return max(1, min(rows.values()))


def merge_fetches(per_place: list[list], merged: bool) -> list:
    """Fetched values over the places: concatenated along dim 0 (0-d values stacked), or with
    merged=False a list per fetch with one array per place."""
    out = []
    for values in zip(*per_place):
        if not merged:
            out.append(list(values))
        elif isinstance(values[0], list):  # a tensor array: each element over the places,
            # as fluid merges a fetched LoDTensorArray
            _check_same_length(values)
            out.append(merge_fetches([list(v) for v in values], True))
        elif values[0].ndim == 0:
            out.append(np.stack(values))
        else:
            out.append(np.concatenate(values, axis=0))
    return out


def _check_same_length(arrays: tuple) -> None:
    if len({len(a) for a in arrays}) != 1:
        raise FeedError(
            f"cannot merge a fetched tensor array over the places: the places' arrays have "
            f"{[len(a) for a in arrays]} elements; fetch it with return_merged=False")


def untracked_lod_feeds(program, feed: dict) -> tuple:
    """((name, levels), ...) of fed LoDTensors whose LoD the program does not carry (the
    variable declared lod_level=0) though an op of it reads that variable's LoD, e.g.
    shrink_rnn_memory on `fluid.layers.data('x', shape=[100])` fed a LoDTensor: fluid 1.8's
    LoD travels with every tensor at run time, so its ops see it."""
    from ..ops.registry import get_op_def

    block, found = program.global_block(), []
    for name, value in feed.items():
        if not isinstance(value, LoDTensor) or not value.lod() or not block.has_var(name):
            continue
        if block.var(name).lod_level or not any(
                name in op.inputs.get(slot, ()) for b in program.blocks for op in b.ops
                for slot in get_op_def(op.type).lod_inputs):
            continue
        found.append((name, len(value.lod())))
    return tuple(found)


def with_lod_levels(program, levels: tuple):
    """A copy of `program` whose variables `levels` names have those LoD levels, and every
    op's outputs the levels its shape inference gives them then (what the plan tracks), or
    None where an op's inference does not run again on the copy."""
    from ..ops.build import _set_lod_levels
    from ..ops.registry import InferContext, VarInfo, get_op_def

    copy = program.clone()
    for name, level in levels:
        copy.global_block().var(name).lod_level = level
    try:
        for block in copy.blocks:
            for position, op in enumerate(block.ops):
                opdef = get_op_def(op.type)
                ins = {s: list(ns) for s, ns in op.inputs.items() if ns}
                outs = {s: list(ns) for s, ns in op.outputs.items() if ns}
                infos = {s: [VarInfo(n, v.shape, v.dtype, v.lod_level)
                             for n in ns for v in (block._var_recursive(n),)]
                         for s, ns in ins.items()}
                ctx = InferContext(opdef, infos, outs, dict(op.attrs), f"op #{position}")
                opdef.infer(ctx)
                _set_lod_levels(block, opdef, ins, outs, ctx.lod_levels)
    except Exception:  # noqa: BLE001 - the program as it was is run instead
        return None
    copy._bump()
    return copy
