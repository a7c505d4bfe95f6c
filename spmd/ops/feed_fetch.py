"""feed and fetch: the ops fluid's inference models carry (save_inference_model prepends a
`feed` per input and appends a `fetch` per target; `col` is the position in the feed / fetch
list). Executor.run treats them as fluid's executor does (spmd/executor/feed_fetch_ops.py):
they name the program's feeds and fetches, and the plan runs the program without them, so
they have no kernel. Their shape inference leaves the fed / fetched variable as declared.
"""
from __future__ import annotations

from .registry import define_op


@define_op("feed", inputs=["X"], outputs=["Out"], attrs={"col": ("int", 0)}, grad=None)
def _feed(ctx):
    """Out (a data variable) keeps its declared shape: the fed array is checked against it."""


@define_op("fetch", inputs=["X"], outputs=["Out"], attrs={"col": ("int", 0)}, grad=None)
def _fetch(ctx):
    """Out is the FETCH_LIST variable holding the fetched values."""
