"""Kernels: tree_conv, tdm_child, tdm_sampler, rank_attention and filter_by_instag (see
spmd/ops/contrib_tree.py). Structure (trees, ranks, tags) is read on the host; the float
arithmetic is array expressions against `xp`, with fluid 1.8.5's layouts."""
from __future__ import annotations

import numpy as np

from ..core.lod import make_lod
from ..core.selected_rows import add_rows
from ..errors import InvalidArgumentError
from .registry import kernel

_DTYPES = {2: np.int32, 3: np.int64}


def _host(a) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)


# -- tree_conv ---------------------------------------------------------------------------------
# Each node u (1-based, up to the node count the edges give) has a patch: itself and its
# descendants less than max_depth below it. A patch member at depth d, the i-th (from 1) of
# its parent's n children, weighs the node's features by fluid's eta_t = (D - d) / D,
# eta_l = (1 - eta_t) * ((i - 1) / (n - 1), or 1/2 for an only child) and
# eta_r = (1 - eta_t) * (1 - eta_l) (D = max_depth). Out row u - 1 = [eta_l, eta_r, eta_t]
# sums of the features, times the filter; rows past the node count are zero.

def _tree_weights(edges: np.ndarray, max_nodes: int, max_depth: int) -> np.ndarray:
    """[max_nodes (patch roots), max_nodes (members), 3 (l, r, t)] weights of one tree."""
    pairs = edges.reshape(-1, 2)
    real = (pairs[:, 0] != 0) & (pairs[:, 1] != 0)
    node_count = int(real.sum()) + 1
    if node_count > max_nodes:
        raise InvalidArgumentError(
            f"tree_conv: the edges name {node_count} nodes but NodesVector holds "
            f"{max_nodes} per tree")
    children: dict[int, list[int]] = {}
    for u, v in pairs:
        if u == 0 or v == 0:
            break  # fluid reads the edges up to the first padding one
        if not (1 <= u <= node_count and 1 <= v <= node_count):
            raise InvalidArgumentError(
                f"tree_conv: edge ({int(u)}, {int(v)}) names a node outside 1..{node_count} "
                f"(node ids start at 1; [0, 0] pads the edge list)")
        children.setdefault(int(u), []).append(int(v))
    coef = np.zeros((max_nodes, max_nodes, 3))
    depth_f = float(max_depth)
    for root in range(1, node_count + 1):
        members = [(root, 1, 1, 0)]
        visited, stack = {root}, [(root, 0)]
        while stack:  # fluid's walk: every eligible child of the top is pushed at once
            node, depth = stack[-1]
            kids = children.get(node, [])
            pushed = False
            for i, v in enumerate(kids):
                if v not in visited and depth + 1 < max_depth:
                    visited.add(v)
                    stack.append((v, depth + 1))
                    members.append((v, i + 1, len(kids), depth + 1))
                    pushed = True
            if not pushed:
                stack.pop()
        for v, index, siblings, depth in members:
            eta_t = (depth_f - depth) / depth_f
            eta_l = (1.0 - eta_t) * (0.5 if siblings == 1 else (index - 1.0) / (siblings - 1.0))
            eta_r = (1.0 - eta_t) * (1.0 - eta_l)
            coef[root - 1, v - 1] += (eta_l, eta_r, eta_t)
    return coef


def _tree_plan(ins, attrs):
    edges = _host(ins["EdgeSet"])
    nodes = ins["NodesVector"]
    return [_tree_weights(edges[b], nodes.shape[1], attrs["max_depth"])
            for b in range(nodes.shape[0])]


@kernel("tree_conv")
def tree_conv(xp, ins, attrs, want):
    x, w = ins["NodesVector"], ins["Filter"]
    w2 = w.reshape(w.shape[0] * 3, -1)
    outs = []
    for b, coef in enumerate(_tree_plan(ins, attrs)):
        patch = xp.einsum("pnk,nf->pfk", xp.asarray(coef, dtype=x.dtype), x[b])
        outs.append((patch.reshape(patch.shape[0], -1) @ w2).reshape(x.shape[1], *w.shape[2:]))
    return {"Out": xp.stack(outs) if outs else xp.zeros((0, x.shape[1], *w.shape[2:]), x.dtype)}


@kernel("tree_conv_grad")
def tree_conv_grad(xp, ins, attrs, want):
    x, w = ins["NodesVector"], ins["Filter"]
    w2 = w.reshape(w.shape[0] * 3, -1)
    dout = ins["Out@GRAD"].reshape(x.shape[0], x.shape[1], -1)
    dx, dw = xp.zeros_like(x), xp.zeros_like(w2)
    for b, coef in enumerate(_tree_plan(ins, attrs)):
        c = xp.asarray(coef, dtype=x.dtype)
        patch = xp.einsum("pnk,nf->pfk", c, x[b]).reshape(x.shape[1], -1)
        dw += patch.T @ dout[b]
        dpatch = (dout[b] @ w2.T).reshape(x.shape[1], x.shape[2], 3)
        dx[b] = xp.einsum("pnk,pfk->nf", c, dpatch)
    return {"NodesVector@GRAD": dx, "Filter@GRAD": dw.reshape(w.shape)}


# -- tdm_child ---------------------------------------------------------------------------------
# TreeInfo row of node n: [item id (0: not a leaf), layer, parent, child ids...]. A node with
# children gives them and whether each is an item; node 0 (padding) and leaves give zeros.

@kernel("tdm_child")
def tdm_child(xp, ins, attrs, want):
    ids = _host(ins["X"]).astype(np.int64)
    info = _host(ins["TreeInfo"]).astype(np.int64)
    nodes, k = info.shape[0], attrs["child_nums"]
    flat = ids.reshape(-1)
    bad = (flat < 0) | (flat >= nodes)
    if bad.any():
        raise InvalidArgumentError(f"tdm_child: node id {int(flat[bad][0])} is outside the "
                                   f"tree's [0, {nodes}) nodes")
    kids = info[flat, 3:3 + k]
    has = (flat != 0) & (info[flat, 3] != 0)
    child = np.where(has[:, None], kids, 0)
    mask = np.where(has[:, None], info[child, 0] != 0, False)
    dtype = _DTYPES[attrs["dtype"]]
    shape = ids.shape + (k,)
    return {"Child": xp.asarray(child.astype(dtype).reshape(shape)),
            "LeafMask": xp.asarray(mask.astype(dtype).reshape(shape))}


# -- tdm_sampler -------------------------------------------------------------------------------
# For each leaf id: per layer its ancestor (Travel; 0 pads an unbalanced tree: zeros with
# mask 0), label 1, then neg_samples_num_list[l] distinct other nodes of that layer (Layer
# rows layer_offset_lod[l]:layer_offset_lod[l + 1]) drawn uniformly, label 0. seed != 0 draws
# the same samples every run, as fluid's sampler seeded per run; 0 the program's stream.

@kernel("tdm_sampler", context=True)
def tdm_sampler(xp, ins, attrs, want, ctx):
    ids = _host(ins["X"]).astype(np.int64).reshape(-1)
    travel = _host(ins["Travel"]).astype(np.int64)
    layer = _host(ins["Layer"]).astype(np.int64).reshape(-1)
    negs, offsets = list(attrs["neg_samples_num_list"]), list(attrs["layer_offset_lod"])
    positive = int(attrs["output_positive"])
    rng = np.random.default_rng(attrs["seed"]) if attrs["seed"] else ctx.rng
    width = sum(negs) + positive * len(negs)
    out = np.zeros((ids.size, width), np.int64)
    labels = np.zeros_like(out)
    mask = np.ones_like(out)
    bad = (ids < 0) | (ids >= travel.shape[0])
    if bad.any():
        raise InvalidArgumentError(f"tdm_sampler: leaf id {int(ids[bad][0])} is outside "
                                   f"Travel's [0, {travel.shape[0]}) rows")
    for i, leaf in enumerate(ids):
        col = 0
        for li, neg in enumerate(negs):
            start, end = offsets[li], offsets[li + 1]
            if neg > end - start - 1:
                raise InvalidArgumentError(
                    f"tdm_sampler: layer {li} has {end - start} nodes, so at most "
                    f"{end - start - 1} negatives, got {neg}")
            node = travel[leaf, li]
            if node == 0:  # padding of an unbalanced tree
                mask[i, col:col + neg + positive] = 0
                col += neg + positive
                continue
            if positive:
                out[i, col], labels[i, col] = node, 1
                col += 1
            drawn: list[int] = []
            while len(drawn) < neg:
                pick = int(rng.integers(0, end - start))
                if layer[start + pick] != node and pick not in drawn:
                    drawn.append(pick)
            out[i, col:col + neg] = layer[start + np.asarray(drawn, np.int64)]
            col += neg
    dtype = _DTYPES[attrs["dtype"]]
    return {"Out": xp.asarray(out.astype(dtype)), "Labels": xp.asarray(labels.astype(dtype)),
            "Mask": xp.asarray(mask.astype(dtype))}


# -- rank_attention ----------------------------------------------------------------------------
# RankOffset row i: [rank of i, then per slot k < MaxRank: (rank of slot k's instance, its row
# in X)]; ranks from 1, <= 0 for none. Out[i] = sum over the filled slots k of
# X[row_k] @ RankParam block (rank_i - 1) * MaxRank + (rank_k - 1) (blocks of D rows).

def _rank_plan(ins, attrs):
    offset = _host(ins["RankOffset"]).astype(np.int64)
    rank, n = attrs["MaxRank"], ins["X"].shape[0]
    if offset.shape != (n, 2 * rank + 1):
        raise InvalidArgumentError(f"rank_attention: RankOffset must be [{n}, {2 * rank + 1}]"
                                   f", got {list(offset.shape)}")
    lower = offset[:, :1] - 1
    faster = offset[:, 1::2] - 1
    rows = offset[:, 2::2]
    valid = (lower >= 0) & (faster >= 0)
    if (valid & ((rows < 0) | (rows >= n))).any():
        raise InvalidArgumentError(f"rank_attention: a filled slot of RankOffset names a row "
                                   f"outside X's {n}")
    block = np.where(valid, lower * rank + faster, 0)
    return valid, np.where(valid, rows, 0), block


def _expanded_input(xp, x, valid, rows):
    picked = x[xp.asarray(rows)]                                    # [N, R, D]
    return xp.where(xp.asarray(valid)[..., None], picked, xp.zeros((), x.dtype))


@kernel("rank_attention")
def rank_attention(xp, ins, attrs, want):
    x, param = ins["X"], ins["RankParam"]
    valid, rows, block = _rank_plan(ins, attrs)
    blocks = param.reshape(-1, x.shape[1], param.shape[1])[xp.asarray(block)]  # [N, R, D, P]
    return {"Out": xp.einsum("nkd,nkdp->np", _expanded_input(xp, x, valid, rows), blocks)}


@kernel("rank_attention_grad")
def rank_attention_grad(xp, ins, attrs, want):
    x, param, dout = ins["X"], ins["RankParam"], ins["Out@GRAD"]
    valid, rows, block = _rank_plan(ins, attrs)
    expanded = _expanded_input(xp, x, valid, rows)
    per_slot = xp.einsum("nkd,np->nkdp", expanded, dout)[xp.asarray(valid)]
    dparam = xp.zeros((param.shape[0] // x.shape[1], x.shape[1] * param.shape[1]), param.dtype)
    add_rows(xp, dparam, xp.asarray(block[valid]), per_slot.reshape(per_slot.shape[0], -1))
    return {"RankParam@GRAD": dparam.reshape(param.shape)}


# -- filter_by_instag --------------------------------------------------------------------------
# Instance i (a sequence of Ins when is_lod and Ins has LoD, else row i) is kept when one of
# its tags (sequence i of Ins_tag) is in Filter_tag. Out: the kept instances' rows (their
# LoD); IndexMap rows [out row, Ins row, rows]; LossWeight 1 per kept instance. Nothing kept:
# one row of out_val_if_empty with LossWeight 0.

def _instag_plan(ins, attrs):
    x = ins["Ins"]
    tag_lod = ins.get("Ins_tag@LOD")
    if not tag_lod:
        raise InvalidArgumentError("filter_by_instag: Ins_tag carries no LoD; feed each "
                                   "instance's tags as one sequence of a LoDTensor")
    tag_off = tag_lod[-1]
    x_lod = ins.get("Ins@LOD")
    if attrs["is_lod"] and x_lod:
        x_off = x_lod[0]
    else:
        x_off = np.arange(x.shape[0] + 1, dtype=np.int64)
    if x_off.size != tag_off.size:
        raise InvalidArgumentError(
            f"filter_by_instag: Ins holds {x_off.size - 1} instances but Ins_tag the tags of "
            f"{tag_off.size - 1}")
    tags = _host(ins["Ins_tag"]).reshape(-1)
    wanted = set(_host(ins["Filter_tag"]).reshape(-1).tolist())
    kept = [i for i in range(x_off.size - 1)
            if any(int(t) in wanted for t in tags[tag_off[i]:tag_off[i + 1]])]
    starts = x_off[kept] if kept else np.zeros((0,), np.int64)
    lengths = (x_off[1:] - x_off[:-1])[kept] if kept else np.zeros((0,), np.int64)
    return starts, lengths


@kernel("filter_by_instag")
def filter_by_instag(xp, ins, attrs, want):
    x = ins["Ins"]
    starts, lengths = _instag_plan(ins, attrs)
    if not starts.size:
        one = make_lod([[0, 1]])
        return {"Out": xp.full((1, *x.shape[1:]), attrs["out_val_if_empty"], dtype=x.dtype),
                "Out@LOD": one, "LossWeight": xp.zeros((1, 1), np.float32),
                "LossWeight@LOD": one, "IndexMap": xp.asarray(np.array([[0, 1, 1]], np.int64)),
                "IndexMap@LOD": one}
    out_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    src = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)]) \
        if lengths.sum() else np.zeros((0,), np.int64)
    index = np.stack([out_off[:-1], starts, lengths], axis=1).astype(np.int64)
    per = make_lod([np.arange(starts.size + 1)])
    return {"Out": x[xp.asarray(src)], "Out@LOD": make_lod([out_off]),
            "LossWeight": xp.ones((starts.size, 1), np.float32), "LossWeight@LOD": per,
            "IndexMap": xp.asarray(index), "IndexMap@LOD": per}


@kernel("filter_by_instag_grad")
def filter_by_instag_grad(xp, ins, attrs, want):
    x, dout = ins["Ins"], ins["Out@GRAD"]
    starts, lengths = _instag_plan(ins, attrs)
    dx = xp.zeros_like(x)
    if starts.size:
        src = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)]) \
            if lengths.sum() else np.zeros((0,), np.int64)
        dx[xp.asarray(src)] = dout[:src.size]
    return {"Ins@GRAD": dx}
