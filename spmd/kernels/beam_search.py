"""Kernels: beam_search and beam_search_decode (see spmd/ops/beam_search.py), on the host, with
fluid 1.8's CPU order of candidates so that ties resolve as fluid resolves them.

beam_search keeps, for each source sentence, the best `beam_size` candidates of all its
prefixes (a prefix that already ended offers only end_id, at its score); a source whose
selected candidates are all end_id after ended prefixes is pruned (no rows). Its outputs'
LoD: level 0 the input's (absolute rows), level 1 the selected candidates of each input row.

beam_search_decode walks the steps' LoD back from the last step: each sentence follows its
prefixes to the first step, keeping the end token once; the sentences of each source are
sorted by their final score, best first.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..errors import InvalidArgumentError
from .registry import kernel


def _host(a) -> np.ndarray:
    get = getattr(a, "get", None)  # a cupy array comes to the host
    return np.asarray(get() if callable(get) else a)


def _absolute(lod) -> list[np.ndarray]:
    """fluid's ToAbsOffset: every level's offsets in rows of the tensor."""
    levels = [np.asarray(lv, dtype=np.int64) for lv in lod]
    out = list(levels)
    for i in range(len(levels) - 2, -1, -1):
        out[i] = out[i + 1][levels[i]]
    return out


def _better(a, b) -> bool:
    """fluid's Item order: a higher score, then a higher prefix row, ranks first."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] > b[1])


def _insert(top: list, item, beam_size: int) -> None:
    """fluid's Insert into the best-first list `top` of at most beam_size items (an item equal
    to the last one replaces it; equal items keep their order of arrival otherwise)."""
    if len(top) < beam_size:
        top.append(item)
    elif _better(top[-1], item):
        return
    k = len(top) - 2
    while k >= 0 and _better(item, top[k]):
        top[k + 1] = top[k]
        k -= 1
    top[k + 1] = item


def _candidates(scores, ids, pre_ids, pre_scores, row, end_id, accumulated, beam_size):
    """(score, row, id) of the candidates of prefix `row` that can still be chosen, in
    column order. A candidate with beam_size better ones in its own row never is, whatever
    else arrives (and what it could push out has those better ones too), so only the scores
    at or above the row's beam_size-th best are offered: a row of a whole vocabulary costs
    one partition, not a Python loop over every column."""
    if pre_ids[row] == end_id:  # an ended prefix can only end again, at its score
        return [(pre_scores[row], row, end_id)]
    s = scores[row]
    if not accumulated:
        with np.errstate(divide="ignore"):
            s = pre_scores[row] + np.log(s)
    columns = np.arange(s.size)
    if s.size > beam_size:
        threshold = np.partition(s, s.size - beam_size)[s.size - beam_size]
        columns = np.flatnonzero(s >= threshold)
    ids_row = ids[row] if ids is not None else columns
    if ids is not None:
        ids_row = ids_row[columns]
    return [(s[d], row, int(i)) for d, i in zip(columns, ids_row)]


@kernel("beam_search")
def beam_search(xp, ins, attrs, want):
    lod = ins.get("scores@LOD")
    if lod is None:
        raise InvalidArgumentError(
            "beam_search: scores carries no LoD; it needs pre_ids' two-level LoD (sources -> "
            "prefixes): compute it from pre_ids' LoD tensors, or give it that LoD with "
            "fluid.layers.lod_reset(scores, pre_ids)")
    scores = _host(ins["scores"])
    rows = scores.shape[0]
    scores = scores.reshape(rows, -1)
    pre_ids = _host(ins["pre_ids"]).reshape(-1)
    pre_scores = _host(ins["pre_scores"]).reshape(-1).astype(scores.dtype)
    ids = ins.get("ids")
    ids = _host(ids).reshape(rows, -1) if ids is not None else None
    for what, n in (("pre_ids", pre_ids.size), ("pre_scores", pre_scores.size)):
        if n != rows:
            raise InvalidArgumentError(
                f"beam_search: {what} has {n} rows but scores has {rows}; each prefix (row of "
                f"pre_ids) must have one row of candidate scores")
    if ids is not None and ids.shape != scores.shape:
        raise InvalidArgumentError(
            f"beam_search: ids has shape {list(ids.shape)} but scores {list(scores.shape)}; "
            f"they must match (topk's indices and values)")
    sources = _absolute(lod)[attrs["level"]]
    if sources[-1] != rows:
        raise InvalidArgumentError(
            f"beam_search: scores' LoD {[lv.tolist() for lv in lod]} covers {sources[-1]} "
            f"rows, but scores has {rows}")
    beam_size, end_id = attrs["beam_size"], attrs["end_id"]
    chosen = [[] for _ in range(rows)]  # per prefix row, best first
    for src in range(sources.size - 1):
        top: list = []
        for row in range(sources[src], sources[src + 1]):
            for item in _candidates(scores, ids, pre_ids, pre_scores, row, end_id,
                                    attrs["is_accumulated"], beam_size):
                _insert(top, item, beam_size)
        for item in top:
            chosen[item[1]].append(item)
        # a source whose every branch ended one step ago and only ends again is dropped
        # (one step after ending, so that the end tokens are written out)
        span = range(sources[src], sources[src + 1])
        if all(item[2] == end_id and pre_ids[row] == end_id for row in span
               for item in chosen[row]):
            for row in span:
                chosen[row] = []
    counts = np.array([len(c) for c in chosen], dtype=np.int64)
    flat = [item for c in chosen for item in c]
    out_lod = make_lod([sources, np.concatenate([[0], np.cumsum(counts)])])
    res = {"selected_ids": xp.asarray(np.array([it[2] for it in flat], dtype=np.int64)
                                      .reshape(-1, 1)),
           "selected_scores": xp.asarray(np.array([it[0] for it in flat], dtype=scores.dtype)
                                         .reshape(-1, 1)),
           "selected_ids@LOD": out_lod, "selected_scores@LOD": out_lod}
    if "parent_idx" in want:
        res["parent_idx"] = xp.asarray(np.repeat(np.arange(rows), counts).astype(np.int32))
    return res


# -- beam_search_decode ---------------------------------------------------------------------------

def _step_lods(lods, n: int, slot: str) -> list:
    if lods is None or len(lods) != n:
        raise InvalidArgumentError(
            f"beam_search_decode: the elements of {slot} carry no LoD; write each step's "
            f"beam_search outputs (two-level LoD tensors) into the arrays with array_write")
    for t, lod in enumerate(lods):
        if lod is None or len(lod) != 2:
            got = "none" if lod is None else f"{len(lod)} level(s)"
            raise InvalidArgumentError(
                f"beam_search_decode: element {t} of {slot} has {got} of LoD; every step must "
                f"hold a two-level LoD tensor (sources -> prefixes -> ids), as beam_search "
                f"outputs and the initial ids fed with LoD [[1] * batch, [1] * batch]")
    return [[np.asarray(lv, dtype=np.int64) for lv in lod] for lod in lods]


def _backtrace(steps_ids, steps_scores, lods, beam_size: int, end_id: int):
    """Each source's sentences as (ids, scores) lists, latest step first."""
    num_src = lods[0][0].size - 1
    sentences = [[([], []) for _ in range(beam_size)] for _ in range(num_src)]
    prefixes = [[] for _ in range(num_src)]  # the row each sentence continues from
    for t in range(len(steps_ids) - 1, -1, -1):
        ids, scores = steps_ids[t], steps_scores[t]
        src_level, cand_level = lods[t]
        for src in range(num_src):
            found, rows = sentences[src], prefixes[src]
            first, last = src_level[src], src_level[src + 1]
            if not rows:  # the source ended at this step (or this is the last step)
                for row in range(first, last):
                    for cand in range(cand_level[row], cand_level[row + 1]):
                        if len(rows) == beam_size:
                            raise InvalidArgumentError(
                                f"beam_search_decode: source {src} has more than beam_size="
                                f"{beam_size} candidates at step {t}; pass the beam_size "
                                f"the beam_search steps used")
                        found[len(rows)][0].append(int(ids[cand]))
                        found[len(rows)][1].append(scores[cand])
                        rows.append(row)
                continue
            for k, cand in enumerate(rows):
                if ids[cand] != end_id or not found[k][0]:  # keep one end token
                    found[k][0].append(int(ids[cand]))
                    found[k][1].append(scores[cand])
                rows[k] = int(np.searchsorted(cand_level, cand, side="right")) - 1
    return sentences


@kernel("beam_search_decode")
def beam_search_decode(xp, ins, attrs, want):
    steps_ids = [_host(a).reshape(-1) for a in ins["Ids"] if a is not None]
    steps_scores = [_host(a).reshape(-1) for a in ins["Scores"] if a is not None]
    if not steps_ids or len(steps_ids) != len(ins["Ids"]):
        raise InvalidArgumentError(
            "beam_search_decode: Ids is empty or has unwritten steps; write every step's "
            "selected ids into it with array_write")
    if len(steps_scores) != len(steps_ids):
        raise InvalidArgumentError(
            f"beam_search_decode: Ids holds {len(steps_ids)} steps and Scores "
            f"{len(steps_scores)}; write both at every step")
    lods = _step_lods(ins.get("Ids@LOD"), len(steps_ids), "Ids")
    dtype = steps_scores[0].dtype
    sentences = _backtrace(steps_ids, steps_scores, lods, attrs["beam_size"], attrs["end_id"])
    ids, scores, src_level, sent_level = [], [], [0], [0]
    for found in sentences:
        # best final score first (a stable sort, as fluid's insertion sort of a few beams);
        # a sentence never filled (fewer candidates than beams) goes last
        order = sorted(found, key=lambda s: -float(s[1][0]) if s[1] else np.inf)
        for words, values in order:
            ids.extend(reversed(words))
            scores.extend(reversed(values))
            sent_level.append(sent_level[-1] + len(words))
        src_level.append(src_level[-1] + len(order))
    out_lod = make_lod([src_level, sent_level])
    return {"SentenceIds": xp.asarray(np.array(ids, dtype=np.int64)),
            "SentenceScores": xp.asarray(np.array(scores, dtype=dtype)),
            "SentenceIds@LOD": out_lod, "SentenceScores@LOD": out_lod}
