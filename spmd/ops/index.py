"""Op definitions: picking, sorting, scattering and finding elements by index."""
from __future__ import annotations

from .registry import REQUIRED, define_op
from .tensor import _check_int_dtype, _norm_axis


@define_op("arg_max", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"axis": ("int", 0), "keepdims": ("bool", False), "dtype": ("int", -1)})
def _arg_max(ctx):
    _arg_infer(ctx)


@define_op("arg_min", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"axis": ("int", 0), "keepdims": ("bool", False), "dtype": ("int", -1)})
def _arg_min(ctx):
    _arg_infer(ctx)


def _arg_infer(ctx):
    x = ctx.input("X")
    axis = _norm_axis(ctx, ctx.attr("axis"), len(x.shape))
    shape = list(x.shape)
    if ctx.attr("keepdims"):
        shape[axis] = 1
    else:
        del shape[axis]
    ctx.set_output("Out", shape or [1], "int64")


@define_op("argsort", inputs=["X"], outputs=["Out", "Indices"], nondiff_outputs=("Indices",),
           grad_uses=("X", "Indices"), attrs={"axis": ("int", -1), "descending": ("bool", False)})
def _argsort(ctx):
    x = ctx.input("X")
    _norm_axis(ctx, ctx.attr("axis"), len(x.shape))
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Indices", x.shape, "int64")


@define_op("gather_nd", inputs=["X", "Index"], outputs=["Out"], no_grad_inputs=("Index",),
           grad_uses=("X", "Index"))
def _gather_nd(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _check_int_dtype(ctx, index, "Index")
    k = index.shape[-1]
    ctx.check(k >= 0 and k <= len(x.shape),
              f"the last dim of Index ({k}) must be known and at most X's rank "
              f"{len(x.shape)} (X {list(x.shape)}, Index {list(index.shape)})")
    ctx.set_output("Out", tuple(index.shape[:-1]) + tuple(x.shape[k:]), x.dtype)


@define_op("index_sample", inputs=["X", "Index"], outputs=["Out"], no_grad_inputs=("Index",),
           grad_uses=("X", "Index"))
def _index_sample(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _check_int_dtype(ctx, index, "Index")
    ctx.check(len(x.shape) == 2 and len(index.shape) == 2,
              f"X and Index must both be 2-D, got X {list(x.shape)}, Index {list(index.shape)}")
    ctx.set_output("Out", index.shape, x.dtype)


@define_op("index_select", inputs=["X", "Index"], outputs=["Out"], no_grad_inputs=("Index",),
           grad_uses=("X", "Index"), attrs={"dim": ("int", 0)})
def _index_select(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _check_int_dtype(ctx, index, "Index")
    dim = _norm_axis(ctx, ctx.attr("dim"), len(x.shape), "dim")
    ctx.check(len(index.shape) == 1 or (len(index.shape) == 2 and index.shape[1] == 1),
              f"Index must be 1-D, got shape {list(index.shape)}")
    shape = list(x.shape)
    shape[dim] = index.shape[0]
    ctx.set_output("Out", shape, x.dtype)


@define_op("scatter", inputs=["X", "Ids", "Updates"], outputs=["Out"], no_grad_inputs=("Ids",),
           grad_uses=("Ids", "Updates"), attrs={"overwrite": ("bool", True)})
def _scatter(ctx):
    x, ids, upd = ctx.input("X"), ctx.input("Ids"), ctx.input("Updates")
    _check_int_dtype(ctx, ids, "Ids")
    ctx.check(len(upd.shape) == len(x.shape) and all(
        a < 0 or b < 0 or a == b for a, b in zip(upd.shape[1:], x.shape[1:])),
        f"Updates {list(upd.shape)} must be shaped [len(Ids)] + X.shape[1:] (X {list(x.shape)})")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("scatter_nd_add", inputs=["X", "Index", "Updates"], outputs=["Out"],
           no_grad_inputs=("Index",), grad_uses=("Index", "Updates"))
def _scatter_nd_add(ctx):
    x, index, upd = ctx.input("X"), ctx.input("Index"), ctx.input("Updates")
    _check_int_dtype(ctx, index, "Index")
    k = index.shape[-1]
    want = tuple(index.shape[:-1]) + tuple(x.shape[k:])
    ctx.check(len(upd.shape) == len(want) and all(
        a < 0 or b < 0 or a == b for a, b in zip(upd.shape, want)),
        f"Updates {list(upd.shape)} must be shaped Index.shape[:-1] + X.shape[Index.shape[-1]:] "
        f"= {list(want)}")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("multiplex", inputs=["Ids", "X*"], outputs=["Out"], no_grad_inputs=("Ids",),
           grad_uses=("Ids", "X"))
def _multiplex(ctx):
    ids, xs = ctx.input("Ids"), ctx.inputs("X")
    _check_int_dtype(ctx, ids, "Ids")
    ctx.check(len(xs) >= 2, f"multiplex needs at least 2 candidate inputs, got {len(xs)}")
    ctx.check(len(ids.shape) == 2 and ids.shape[1] in (1, -1),
              f"Ids must be shaped [batch, 1], got {list(ids.shape)}")
    ctx.set_output("Out", xs[0].shape, xs[0].dtype)


@define_op("where_index", inputs=["Condition"], outputs=["Out"], grad=None)
def _where_index(ctx):
    cond = ctx.input("Condition")
    ctx.set_output("Out", (-1, len(cond.shape)), "int64")


@define_op("where", inputs=["Condition", "X", "Y"], outputs=["Out"],
           no_grad_inputs=("Condition",), grad_uses=("Condition", "X", "Y"))
def _where(ctx):
    """Out = X where Condition else Y. As in fluid 1.8 the three have one shape (paddle.where
    broadcasts them before the op); X@GRAD / Y@GRAD are Out@GRAD where Condition holds / not."""
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    ctx.check(cond.dtype == "bool",
              f"Condition '{cond.name}' is {cond.dtype}; where takes a bool Condition (use a "
              f"comparison or cast(x, 'bool') first)")
    ctx.check(x.dtype == y.dtype,
              f"X '{x.name}' is {x.dtype} but Y '{y.name}' is {y.dtype}: cast one of them")
    for other, what in ((cond, "Condition"), (y, "Y")):
        same = len(other.shape) == len(x.shape) and all(
            a == b or -1 in (a, b) for a, b in zip(other.shape, x.shape))
        ctx.check(same, f"{what} {list(other.shape)} and X {list(x.shape)} must have the same "
                        f"shape (paddle.where broadcasts them first)")
    ctx.set_output("Out", x.shape, x.dtype)


@define_op("unique", inputs=["X"], outputs=["Out", "Index"], grad=None,
           attrs={"dtype": ("dtype", "int32")})
def _unique(ctx):
    x = ctx.input("X")
    ctx.check(len(x.shape) == 1, f"X must be 1-D, got shape {list(x.shape)}")
    ctx.set_output("Out", (-1,), x.dtype)
    ctx.set_output("Index", x.shape, ctx.attr("dtype"))


@define_op("unique_with_counts", inputs=["X"], outputs=["Out", "Index", "Count"], grad=None,
           attrs={"dtype": ("dtype", "int32")})
def _unique_with_counts(ctx):
    _unique(ctx)
    ctx.set_output("Count", (-1,), ctx.attr("dtype"))


@define_op("shard_index", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"index_num": ("int", 0), "nshards": ("int", 0), "shard_id": ("int", 0),
                  "ignore_value": ("int", -1)})
def _shard_index(ctx):
    x = ctx.input("X")
    _check_int_dtype(ctx, x, "X")
    num, n, sid = ctx.attr("index_num"), ctx.attr("nshards"), ctx.attr("shard_id")
    ctx.check(num > 0 and n > 0, f"index_num and nshards must be > 0, got {num} and {n}")
    ctx.check(0 <= sid < n, f"shard_id must be in [0, {n}), got {sid}")
    ctx.check(len(x.shape) >= 2 and x.shape[-1] in (1, -1),
              f"X must end in a dim of 1 (e.g. [N, 1]), got {list(x.shape)}")
    ctx.set_output_like("Out", "X")


@define_op("hash", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"num_hash": ("int", 1), "mod_by": ("int", 100000)})
def _hash(ctx):
    x = ctx.input("X")
    _check_int_dtype(ctx, x, "X")
    ctx.check(ctx.attr("num_hash") > 0 and ctx.attr("mod_by") > 0,
              f"num_hash and hash_size must be > 0, got {ctx.attr('num_hash')} and "
              f"{ctx.attr('mod_by')}")
    ctx.set_output("Out", tuple(x.shape[:-1]) + (ctx.attr("num_hash"), 1), "int64")


# -- beam search and attention masks (no gradient) ------------------------------------------
@define_op("gather_tree", inputs=["Ids", "Parents"], outputs=["Out"], grad=None)
def _gather_tree(ctx):
    ids, parents = ctx.input("Ids"), ctx.input("Parents")
    _check_int_dtype(ctx, ids, "Ids")
    _check_int_dtype(ctx, parents, "Parents")
    ctx.check(len(ids.shape) == 3,
              f"Ids must be [max_time, batch_size, beam_size], got shape {list(ids.shape)}")
    ctx.check(len(parents.shape) == 3 and all(
        a < 0 or b < 0 or a == b for a, b in zip(ids.shape, parents.shape)),
              f"Parents must have Ids' shape {list(ids.shape)}, got {list(parents.shape)}")
    ctx.set_output("Out", ids.shape, ids.dtype)


@define_op("similarity_focus", inputs=["X"], outputs=["Out"], grad=None,
           attrs={"axis": ("int", REQUIRED), "indexes": ("ints", REQUIRED)})
def _similarity_focus(ctx):
    x, axis, indexes = ctx.input("X"), ctx.attr("axis"), ctx.attr("indexes")
    ctx.check(len(x.shape) == 4, f"X must be 4-D [N, A, B, C], got shape {list(x.shape)}")
    ctx.check(axis in (1, 2, 3), f"attribute 'axis' must be 1, 2 or 3, got {axis}")
    ctx.check(len(indexes) > 0, "attribute 'indexes' must name at least one index, got []")
    size = x.shape[axis]
    ctx.check(all(0 <= i and (size < 0 or i < size) for i in indexes),
              f"indexes {indexes} must lie in [0, {size - 1}] (X's dim {axis} has size {size})")
    ctx.set_output("Out", x.shape, x.dtype)
