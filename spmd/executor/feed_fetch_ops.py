"""Programs holding fluid's `feed` and `fetch` ops (inference models: save_inference_model
writes them, load_inference_model's program has them, as fluid 1.8's do), run as fluid's
executor runs them.

fluid's Executor adds feed and fetch ops to the program it runs unless the program has them;
if it has, they must match the run's feeds and fetches (`has_feed_operators` /
`has_fetch_operators`): every feed op's target fed and as many feeds as feed ops, every fetch
op's source fetched at its `col`, as many fetches as fetch ops; a mismatch is an error. spmd's
plan takes the feeds and fetches by name, so once checked the program runs without those ops
(and without the FEED_MINIBATCH / FETCH_LIST holder variables): a copy, made once per program
version.

>>> import spmd.fluid as fluid
>>> p = fluid.Program()
>>> with fluid.program_guard(p, fluid.Program()):
...     x = fluid.data("x", [None, 2], "float32"); y = fluid.layers.scale(x, 2.0)
>>> add_feed_fetch_ops(p, ["x"], [y.name])
>>> [op.type for op in p.global_block().ops], feed_fetch_names(p)
(['feed', 'scale', 'fetch'], (['x'], ['scale_0.tmp_0']))
>>> [op.type for op in runnable(p).global_block().ops]
['scale']
"""
from __future__ import annotations

import weakref

from ..errors import InvalidArgumentError

FEED_HOLDER, FETCH_HOLDER = "feed", "fetch"
_HOLDER_KINDS = ("FEED_MINIBATCH", "FETCH_LIST")
# the ops a run leaves out: fluid's feed and fetch ops, and py_reader's reader ops (its data
# comes through the reader's run hook, spmd/reader/py_reader.py)
_NOT_RUN = frozenset({"feed", "fetch", "create_py_reader", "create_double_buffer_reader",
                      "read"})

# program -> (its version, the copy without feed/fetch ops, or None when it has none)
_RUNNABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def has_feed_fetch_ops(program) -> bool:
    return runnable(program) is not program


def feed_fetch_names(program) -> tuple[list[str], list[str]]:
    """(the feed ops' targets, the fetch ops' sources), each in `col` order (fluid's
    ProgramDesc.get_feed_target_names / get_fetch_target_names)."""
    feeds, fetches = {}, {}
    for op in program.global_block().ops:
        if op.type == "feed":
            feeds[op.attr("col")] = op.output("Out")[0]
        elif op.type == "fetch":
            fetches[op.attr("col")] = op.input("X")[0]
    return [feeds[c] for c in sorted(feeds)], [fetches[c] for c in sorted(fetches)]


def add_feed_fetch_ops(program, feed_names, fetch_names) -> None:
    """Give `program` (in place) fluid's feed ops for `feed_names` and fetch ops for
    `fetch_names`, and their holder variables (fluid's prepend_feed_ops / append_fetch_ops:
    feed ops prepended in order, so the last feed's op comes first)."""
    block = program.global_block()
    if not block.has_var(FEED_HOLDER):
        block.create_var(name=FEED_HOLDER, type="FEED_MINIBATCH", persistable=True)
    if not block.has_var(FETCH_HOLDER):
        block.create_var(name=FETCH_HOLDER, type="FETCH_LIST", persistable=True)
    for col, name in enumerate(feed_names):
        block.var(name)  # NotFoundError naming close names
        block._prepend_op("feed", inputs={"X": [FEED_HOLDER]}, outputs={"Out": [name]},
                          attrs={"col": col})
    for col, name in enumerate(fetch_names):
        block.append_op("fetch", inputs={"X": [name]}, outputs={"Out": [FETCH_HOLDER]},
                        attrs={"col": col})


def check_run(program, feed_names, fetch_names) -> None:
    """fluid's checks of a run's feeds and fetches against the program's feed / fetch ops."""
    feeds, fetches = feed_fetch_names(program)
    if feeds:
        missing = [n for n in feeds if n not in feed_names]
        if missing:
            raise InvalidArgumentError(
                f"'feed_targets' does not have {missing[0]} variable: the program's feed ops "
                f"feed {feeds} (an inference model's inputs), the run fed {sorted(feed_names)}")
        if len(feeds) != len(feed_names):
            raise InvalidArgumentError(
                f"Feed operators in program desc do not match 'feed_targets': the feed ops "
                f"feed {feeds}, the run fed {sorted(feed_names)}; feed exactly those")
    if fetches:
        fetch_names = list(fetch_names)
        for col, name in enumerate(fetches):
            if name not in fetch_names:
                raise InvalidArgumentError(
                    f"'fetch_targets' does not have {name} variable: the program's fetch ops "
                    f"fetch {fetches} (an inference model's targets), the run fetches "
                    f"{fetch_names}; pass fetch_list=<the fetch targets load_inference_model "
                    f"returned>")
            if col >= len(fetch_names) or fetch_names[col] != name:
                raise InvalidArgumentError(
                    f"fetch op {col} fetches '{name}', but fetch_list[{col}] is "
                    f"{fetch_names[col] if col < len(fetch_names) else 'missing'}: fetch "
                    f"{fetches} in that order")
        if len(fetches) != len(fetch_names):
            raise InvalidArgumentError(
                f"Fetch operators in program desc do not match 'fetch_targets': the fetch ops "
                f"fetch {fetches}, the run fetches {fetch_names}")


def runnable(program):
    """`program` itself when it holds no feed, fetch or reader op, else its copy without
    them (the fed variables marked as data), made once per version of the program."""
    version = program.version
    cached = _RUNNABLE.get(program)
    if cached is not None and cached[0] == version:
        return cached[1] if cached[1] is not None else program
    block = program.global_block()
    if not any(op.type in _NOT_RUN for op in block.ops):
        _RUNNABLE[program] = (version, None)
        return program
    feeds, _ = feed_fetch_names(program)
    copy = program.clone()
    new_block = copy.global_block()
    new_block.ops = [op for op in new_block.ops if op.type not in _NOT_RUN]
    new_block.vars = {n: v for n, v in new_block.vars.items() if v.type not in _HOLDER_KINDS}
    for name in feeds:
        new_block.vars[name].is_data = True
    copy._bump()
    _RUNNABLE[program] = (version, copy)
    return copy


def check_feed_fetch_ops(program, feed, fetch_names) -> None:
    """A data-parallel run of `program` with feed / fetch ops (a loaded inference model) is
    checked against them as fluid's; its job runs the program without them (`runnable`).
    `feed`: a dict, or one dict per place."""
    if not has_feed_fetch_ops(program):
        return
    one_place = feed[0] if isinstance(feed, list) and feed else feed  # each place's feed
    names = list(one_place) if isinstance(one_place, dict) else []
    check_run(program, names, fetch_names)
