"""Kernels of parameter-server mode's trainer-side ops (spmd/ops/distributed.py): they talk to
the pservers through this process's TrainerSession (spmd/ps/trainer.py). They live in ps/,
not kernels/, because they use ps's transport (kernels/ imports nothing of ps).

The ops address variables by name (the pservers hold them under the trainer program's
names), so these kernels read their op's slot names from `ctx.op`. The control outputs
(`Out` of send and the barriers) get an empty marker array; fetch_barrier's outputs are the
parameters recv received (fluid lists them there as dependencies), handed on unchanged.
"""
from __future__ import annotations

import numpy as np

from ..core.lod import LoDTensor
from ..core.selected_rows import SelectedRows
from ..errors import InvalidArgumentError
from ..kernels.registry import kernel
from .trainer import session, to_host

_MARKER = np.zeros(0, dtype=np.float32)


def _markers(ctx, slot="Out") -> list:
    return [_MARKER] * len(ctx.op.output(slot))


def _offsets(sections) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(sections, dtype=np.int64))])


def split_rows(value, sections) -> list:
    """`value` cut into row blocks of `sections` rows: views of a dense array; for a
    SelectedRows, each block's rows (renumbered from the block's first row) and values."""
    off = _offsets(sections)
    if isinstance(value, SelectedRows):
        if int(off[-1]) != value.height:
            raise InvalidArgumentError(
                f"split_selected_rows: height_sections {list(sections)} add up to "
                f"{int(off[-1])} rows, the gradient's table has {value.height}")
        rows = value.rows.reshape(-1)
        out = []
        for i, rows_i in enumerate(sections):
            mask = (rows >= off[i]) & (rows < off[i + 1])
            out.append(SelectedRows(rows[mask] - off[i], value.value[mask], int(rows_i)))
        return out
    if value.ndim < 1 or value.shape[0] != int(off[-1]):
        raise InvalidArgumentError(
            f"split: sections {list(sections)} add up to {int(off[-1])} rows, the value has "
            f"shape {list(value.shape)}")
    return [value[off[i]:off[i + 1]] for i in range(len(sections))]


@kernel("split_byref")
def split_byref(xp, ins, attrs, want):
    return {"Out": split_rows(ins["X"], attrs["sections"])}


@kernel("split_selected_rows")
def split_selected_rows(xp, ins, attrs, want):
    x = ins["X"]
    if not isinstance(x, SelectedRows):
        raise InvalidArgumentError(
            "split_selected_rows: X is a dense array; it splits the sparse (SelectedRows) "
            "gradient of an is_sparse embedding")
    return {"Out": split_rows(x, attrs["height_sections"])}


@kernel("fake_init", context=True)
def fake_init(xp, ins, attrs, want, ctx):
    """The table is only declared here (the pservers hold it): zeros, which the OS does not
    back with memory until written, so a table larger than this machine's memory fits."""
    name = ctx.op.output("Out")[0]
    dtype = ctx.op.block._var_recursive(name).dtype
    return {"Out": xp.zeros(tuple(attrs["shape"]), dtype=dtype)}


@kernel("send", context=True)
def send(xp, ins, attrs, want, ctx):
    if not attrs["epmap"]:  # Geo-SGD's sends (spmd/ps/geo.py): deltas pushed every k steps
        from .geo_trainer import run_geo_send

        return run_geo_send(xp, ins, attrs, ctx)
    s = session()
    xs, names, eps = ins["X"], ctx.op.input("X"), list(attrs["epmap"])
    if attrs["send_varnames"]:  # runtime_split_send_recv: one variable, cut here
        if len(xs) != 1:
            raise InvalidArgumentError("send with send_varnames takes one variable X")
        xs, names = split_rows(xs[0], attrs["sections"]), list(attrs["send_varnames"])
    elif len(xs) == 1 and len(eps) > 1:  # the async step counter goes to every pserver
        xs, names = xs * len(eps), names * len(eps)
    values = [to_host(x) for x in xs]
    if attrs["merge_add"]:  # the pservers hold the sum of what was sent: send the running sum
        summed = []
        for n, v in zip(names, values):
            total = s.merged.get(n)
            total = v.copy() if total is None else total + v
            summed.append(total)
        s.merged.update(zip(names, summed))
        values = summed
    by_name = dict(zip(zip(names, eps), values))
    for ep, group in s.per_endpoint(names, eps).items():  # sent by the next flush
        s.queue_send(ep, {n: by_name[(n, ep)] for n in group}, s.send_steps,
                     attrs["trainer_id"])
    return {"Out": _markers(ctx)}


def _recv_values(s, names, eps, trainer_id, fetch_step=None) -> dict:
    """The values of `names` from their pservers `eps`; with `fetch_step`, each request also
    waits at that fetch barrier (recorded in s.fetched_at)."""
    s.flush()
    min_step = s.send_steps - 1 if s.send_steps else None
    groups = s.per_endpoint(names, eps)
    if fetch_step is not None:
        s.fetched_at = (fetch_step, set(groups))

    def one(ep):
        return s.client(ep, trainer_id).get_variables(groups[ep], min_step=min_step,
                                                      then_fetch_barrier=fetch_step)

    got = {}
    for values in s.each(one, groups):
        got.update(values)
    return {n: v.array if isinstance(v, LoDTensor) else v for n, v in got.items()}


def _recv_group(op) -> tuple[list, bool]:
    """`op` and the recv ops right after it in its block (the transpiler puts a step's recvs
    together: they are fetched in one request per pserver), and whether a fetch_barrier
    follows them (then those requests also wait at it)."""
    ops = op.block.ops
    at = next(i for i, o in enumerate(ops) if o is op)
    group = []
    for o in ops[at:]:
        if o.type != "recv":
            break
        group.append(o)
    after = at + len(group)
    return group, after < len(ops) and ops[after].type == "fetch_barrier"


def _wanted(op) -> list:
    return list(op.attr("recv_varnames")) or op.output("Out")


@kernel("recv", context=True)
def recv(xp, ins, attrs, want, ctx):
    s = session()
    s.flush()
    outs, parts = ctx.op.output("Out"), list(attrs["recv_varnames"])
    names = parts or outs
    if not all(n in s.recv_ready for n in names):  # the first recv of its group fetches all
        group, barrier_next = _recv_group(ctx.op)
        every = [n for op in group for n in _wanted(op)]
        eps = [ep for op in group for ep in op.attr("epmap")]
        s.recv_ready = _recv_values(s, every, eps, attrs["trainer_id"],
                                    s.fetch_steps if barrier_next else None)
    got = {n: s.recv_ready.pop(n) for n in names}
    if parts:  # runtime_split_send_recv: the blocks of one variable, joined here
        values = [np.concatenate([got[n] for n in parts], axis=0)]
    else:
        values = [got[n] for n in outs]
    values = [xp.asarray(v) for v in values]
    s.received.update(zip(outs, values))
    return {"Out": values}


@kernel("send_barrier", context=True)
def send_barrier(xp, ins, attrs, want, ctx):
    s = session()
    done = s.flush(then_barrier=True)  # the queued gradients and the barrier in one request
    step = s.send_steps
    s.each(lambda ep: s.client(ep, attrs["trainer_id"]).send_barrier(step),
           [ep for ep in attrs["endpoints"] if ep not in done])
    s.send_steps += 1
    return {"Out": _markers(ctx)}


@kernel("fetch_barrier", context=True)
def fetch_barrier(xp, ins, attrs, want, ctx):
    s = session()
    s.flush()
    s.recv_ready = {}  # a recv group's values are handed on below, never reused
    step = s.fetch_steps
    waited_step, waited = s.fetched_at
    done = waited if waited_step == step else set()
    s.fetched_at = (None, set())
    s.each(lambda ep: s.client(ep, attrs["trainer_id"]).fetch_barrier(step),
           [ep for ep in attrs["endpoints"] if ep not in done])
    s.fetch_steps += 1
    return {"Out": [s.received.pop(n, _MARKER) for n in ctx.op.output("Out")]}


@kernel("checkpoint_notify")
def checkpoint_notify(xp, ins, attrs, want):
    s = session()
    s.flush()
    s.each(lambda ep: s.client(ep, attrs["trainer_id"]).checkpoint_notify(attrs["dir"]),
           attrs["epmap"])
    return {}


@kernel("distributed_lookup_table", context=True)
def distributed_lookup_table(xp, ins, attrs, want, ctx):
    """The rows of a table the pservers hold, prefetched from the pserver of each row's
    block (the table cut by height_sections), for every Ids input."""
    s = session()
    s.flush()
    sections, tables = list(attrs["height_sections"]), list(attrs["table_names"])
    eps = list(attrs["endpoints"])
    if not (len(sections) == len(tables) == len(eps)):
        raise InvalidArgumentError(
            f"distributed_lookup_table: {len(tables)} table blocks, {len(sections)} "
            f"height_sections and {len(eps)} endpoints; they go together one by one")
    width, dtype = ins["W"].shape[1:], ins["W"].dtype
    v1 = attrs["lookup_table_version"] == "lookup_table"
    flat = []
    for ids in ins["Ids"]:
        ids = np.asarray(to_host(ids))
        if v1 and (ids.ndim < 1 or ids.shape[-1] != 1):
            raise InvalidArgumentError(
                f"distributed_lookup_table (lookup_table): Ids must end in a dim of 1, got "
                f"shape {list(ids.shape)}")
        flat.append(ids.reshape(-1).astype(np.int64))
    every = np.unique(np.concatenate(flat)) if flat else np.zeros(0, np.int64)
    off = _offsets(sections)
    pad = attrs["padding_idx"]
    lookup = every[every != pad] if pad != -1 else every
    if lookup.size and (lookup.min() < 0 or lookup.max() >= off[-1]):
        raise InvalidArgumentError(
            f"distributed_lookup_table: ids must be in [0, {int(off[-1])}) (the table's "
            f"rows), got [{lookup.min()}, {lookup.max()}]")
    block = np.searchsorted(off, lookup, side="right") - 1
    wanted = [(i, lookup[block == i]) for i in range(len(tables)) if (block == i).any()]

    def one(item):
        i, rows = item
        return s.client(eps[i], attrs["trainer_id"]).prefetch(tables[i], rows - off[i])

    rows_of = np.zeros((every.size,) + tuple(width), dtype=dtype)
    for (_, rows), got in zip(wanted, s.each(one, wanted)):
        rows_of[np.searchsorted(every, rows)] = got
    outs = []
    for ids, orig in zip(flat, ins["Ids"]):
        lead = tuple(orig.shape[:-1]) if v1 else tuple(orig.shape)
        out = rows_of[np.searchsorted(every, ids)]
        outs.append(xp.asarray(out.reshape(lead + tuple(width))))
    lods = ins.get("Ids@LOD")  # given only in a program that carries LoD
    if lods is None:
        return {"Outputs": outs}
    return {"Outputs": outs, "Outputs@LOD": list(lods)}


@kernel("ref_by_trainer_id")
def ref_by_trainer_id(xp, ins, attrs, want):
    """DC-ASGD on the pserver: X[TrainerId], the parameter backup of the trainer whose
    gradient is being applied."""
    backups, trainer = ins["X"], int(np.asarray(ins["TrainerId"]).reshape(-1)[0])
    if not 0 <= trainer < len(backups):
        raise InvalidArgumentError(
            f"ref_by_trainer_id: trainer id {trainer} is not in [0, {len(backups)}) (one "
            f"parameter backup per trainer)")
    return {"Out": backups[trainer]}
