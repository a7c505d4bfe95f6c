"""Op definitions: beam_search (one step of beam search on two-level LoD tensors) and
beam_search_decode (the sentences a loop of beam_search steps found, from tensor arrays of its
outputs), as fluid 1.8 defines them. Neither has a gradient.

LoD layout (fluid's): level 0 groups the prefixes (rows) of each source sentence, level 1 the
candidates of each prefix. beam_search's outputs have one row per selected candidate, level 0
the input's (in absolute rows of the input) and level 1 the selected candidates of each input
row; beam_search_decode's outputs are 1-D, level 0 the sentences of each source and level 1
the words of each sentence.

>>> # ids, scores, parent = beam_search(pre_ids, pre_scores, topk_ids, accu, 4, end_id=1)
"""
from __future__ import annotations

from .registry import define_op

_FLOATS = ("float32", "float64")


def _check_dtype(ctx, slot: str, dtypes, what: str):
    v = ctx.input(slot)
    ctx.check(v.dtype in dtypes,
              f"{slot} '{v.name}' is {v.dtype}; {ctx.opdef.type} takes {what} "
              f"({' or '.join(dtypes)})")
    return v


@define_op("beam_search", inputs=["pre_ids", "pre_scores", "ids?", "scores"],
           outputs=["selected_ids", "selected_scores", "parent_idx?"],
           attrs={"level": ("int", 0), "beam_size": "int", "end_id": "int",
                  "is_accumulated": ("bool", True)},
           grad=None, lod_inputs=("scores",),
           lod_outputs=("selected_ids", "selected_scores"))
def _beam_search(ctx):
    _check_dtype(ctx, "pre_ids", ("int64",), "the previous step's ids")
    pre_scores = _check_dtype(ctx, "pre_scores", _FLOATS, "the previous step's scores")
    scores = _check_dtype(ctx, "scores", _FLOATS, "candidate scores")
    if ctx.has_input("ids"):
        _check_dtype(ctx, "ids", ("int64",), "candidate ids")
    ctx.check(ctx.attr("beam_size") > 0, f"beam_size is {ctx.attr('beam_size')}; it must be "
                                         f"positive")
    ctx.check(ctx.attr("level") in (0,),
              f"level is {ctx.attr('level')}; fluid's beam_search works on level 0 of a "
              f"two-level LoD (leave level=0)")
    ctx.check(scores.lod_level in (0, 2),
              f"scores '{scores.name}' has lod_level {scores.lod_level}; beam_search reads a "
              f"two-level LoD (sources -> prefixes -> candidates): give scores the LoD of "
              f"pre_ids (fluid.layers.lod_reset(scores, pre_ids))")
    ctx.set_output("selected_ids", (-1, 1), "int64")
    ctx.set_output("selected_scores", (-1, 1), pre_scores.dtype)
    ctx.set_output("parent_idx", (-1,), "int32")
    ctx.set_lod_level("selected_ids", 2)
    ctx.set_lod_level("selected_scores", 2)


@define_op("beam_search_decode", inputs=["Ids", "Scores"],
           outputs=["SentenceIds", "SentenceScores"],
           attrs={"beam_size": "int", "end_id": "int"},
           grad=None, lod_inputs=("Ids",),
           lod_outputs=("SentenceIds", "SentenceScores"))
def _beam_search_decode(ctx):
    _check_dtype(ctx, "Ids", ("int64",), "a tensor array of the selected ids")
    scores = _check_dtype(ctx, "Scores", _FLOATS, "a tensor array of the selected scores")
    ctx.set_output("SentenceIds", (-1,), "int64")
    ctx.set_output("SentenceScores", (-1,), scores.dtype)
    ctx.set_lod_level("SentenceIds", 2)
    ctx.set_lod_level("SentenceScores", 2)
