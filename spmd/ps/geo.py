"""Geo-SGD programs (fluid 1.8's GeoSgdTranspiler, fleet's GeoStrategy(k)).

Each trainer keeps its optimizer and trains locally; every k = geo_sgd_need_push_nums steps it
sends, per parameter block, the delta since its last push to the pserver holding the block and
takes the block back (spmd/ps/geo_trainer.py). A pserver only adds what it receives:
one optimize block per parameter block, `sum(param, param.delta) -> param`, no optimizer.

What the transpiler builds, as fluid 1.8.5 does:
- placement: every trainable parameter cut into row blocks over all pservers
  (slice_variable with the number of pservers, whatever slice_var_up says), dealt by the
  split method in parameter order;
- trainer program: the program as it is (optimizer kept) plus one `send` at its end; fluid's
  lists the ids of the is_sparse lookups (send_varnames: their tables), spmd's also lists the
  parameters in X and in Out, because a kernel sees values only through its slots (fluid's
  communicator reads the scope instead);
- trainer startup: the dense parameters received from the pservers (recv, fetch_barrier,
  concat), then `send` of "param_init": the snapshot the first deltas are taken from;
- pserver program: the parameter blocks, a `<block>.delta` per block (SelectedRows for a
  sparse table), listen_and_serv with distributed_mode 3 (fluid's GEO).
"""
from __future__ import annotations

import dataclasses

from ..core.operator import OpRole
from ..core.program import Program
from ..errors import InvalidArgumentError
from .analysis import LOOKUP_TYPES, is_sparse_grad
from .pserver_program import _declare, _new_block
from .slicing import block_var_name, slice_variable
from .trainer_program import control_var, rewrite_startup

GEO = 3  # fluid's DistributedMode.GEO
PARAM_INIT = "param_init"


@dataclasses.dataclass(frozen=True)
class GeoBlock:
    name: str  # the block's variable on its pserver (the parameter's name when whole)
    start: int  # first row in the whole parameter
    rows: int
    endpoint: str


@dataclasses.dataclass(frozen=True)
class GeoParam:
    name: str
    sparse: bool  # an is_sparse table: only the rows looked up since the last push are sent
    blocks: tuple


@dataclasses.dataclass(frozen=True)
class GeoConfig:
    """What a trainer's Geo-SGD communicator needs (fluid's vars_info, trainers, push_nums)."""

    trainer_id: int
    trainers: int
    push_nums: int
    params: tuple  # GeoParam, in the trainer program's parameter order
    id_tables: tuple  # the table each ids input of the geo send looks up


def check_geo_options(t) -> None:
    c = t.config
    k = c.geo_sgd_need_push_nums
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgumentError(
            f"DistributeTranspilerConfig.geo_sgd_need_push_nums is the number of local steps "
            f"between two pushes (an int >= 1), got {k!r}")
    if c.sync_mode:
        raise InvalidArgumentError(
            "DistributeTranspilerConfig.geo_sgd_mode=True trains asynchronously: set "
            "config.sync_mode = False (fleet's StrategyFactory.create_geo_strategy(k) does)")
    for name in ("enable_dc_asgd", "half_async", "completely_not_async"):
        if getattr(c, name):
            raise InvalidArgumentError(
                f"DistributeTranspilerConfig.{name}=True with geo_sgd_mode=True: Geo-SGD "
                f"sends parameter deltas, not gradients; set {name} = False")


def place_geo(t, block) -> None:
    """Blocks of every trainable parameter over all pservers, dealt in order (fluid's
    _init_splited_vars then dispatch)."""
    ups = [u for u in t.analysis.updates if getattr(block.var(u.param), "trainable", True)]
    distributed = [op.input("W")[0] for op in block.ops if op.type in LOOKUP_TYPES
                   and op.attrs.get("is_distributed")]
    if distributed:
        raise InvalidArgumentError(
            f"Geo-SGD keeps every table on the trainers and pushes the touched rows; table(s) "
            f"{sorted(set(distributed))} are is_distributed=True (rows only on the pservers): "
            f"use is_sparse=True without is_distributed for Geo-SGD")
    pblocks = slice_variable([(u.param, block.var(u.param).shape) for u in ups],
                             len(t.endpoints), t.config.min_block_size)
    named = []
    for u in ups:
        mine = [b for b in pblocks if b.name == u.param]
        named.append([dataclasses.replace(
            b, name=u.param if len(mine) == 1 else block_var_name(u.param, b.index, None))
            for b in mine])
    t.dispatcher.reset()
    eplist = t.dispatcher.dispatch([b for bs in named for b in bs])
    t.param_blocks, t.block_endpoint = {}, {}
    t.ep_params = {ep: [] for ep in t.endpoints}
    t.ep_grads = {ep: [] for ep in t.endpoints}
    t.geo_sparse = set()
    params, i = [], 0
    for u, bs in zip(ups, named):
        t.param_blocks[u.param] = bs
        geo_blocks, start = [], 0
        for b in bs:
            ep = eplist[i]
            i += 1
            t.block_endpoint[b.name] = ep
            t.ep_params[ep].append(b)
            geo_blocks.append(GeoBlock(b.name, start, b.rows, ep))
            start += b.rows
        sparse = is_sparse_grad(block, u.grad)
        if sparse:
            t.geo_sparse.add(u.param)
        params.append(GeoParam(u.param, sparse, tuple(geo_blocks)))
    t.geo_params = tuple(params)


def _sparse_ids(t, block) -> tuple[list, list]:
    """(ids variables, their tables) of the is_sparse lookups of geo's sparse parameters,
    each (ids, table) pair once (fluid's sparse_var / sparse_tables)."""
    ids, tables, seen = [], [], set()
    for op in block.ops:
        if op.type not in LOOKUP_TYPES or not op.attrs.get("is_sparse"):
            continue
        for i, w in zip(op.input("Ids"), op.input("W")):
            if w in t.geo_sparse and (i, w) not in seen:
                seen.add((i, w))
                ids.append(i)
                tables.append(w)
    return ids, tables


def rewrite_geo_trainer(t, block) -> None:
    """The geo send at the end of the trainer program; the startup receives the dense
    parameters, then takes the snapshot (param_init)."""
    from .geo_trainer import register

    ids, tables = _sparse_ids(t, block)
    names = [p.name for p in t.geo_params]
    out = control_var(block)
    block.append_op("send", {"X": ids + names}, {"Out": [out.name] + names},
                    {"send_varnames": tables, "epmap": [], "trainer_id": t.trainer_id},
                    role=OpRole.COMMUNICATE)
    t.sparse_tables = set(t.geo_sparse)  # not received by the startup (fluid's rule)
    t.send_blocks = []
    rewrite_startup(t, t.startup, block)
    sb = t.startup.global_block()
    init_out = control_var(sb)
    sb.append_op("send", {"X": names}, {"Out": [init_out.name]},
                 {"send_varnames": [PARAM_INIT], "epmap": [], "trainer_id": t.trainer_id},
                 role=OpRole.COMMUNICATE)
    config = GeoConfig(t.trainer_id, t.trainer_num, int(t.config.geo_sgd_need_push_nums),
                       t.geo_params, tuple(tables))
    register(out.name, config)
    register(init_out.name, config)


def build_geo_pserver_program(t, endpoint: str) -> Program:
    """The pserver's blocks, a delta per block, and one `sum` block per block."""
    prog = Program()
    prog.random_seed = t.origin.random_seed
    g, src = prog.global_block(), t.origin.global_block()
    owner = {b.name: p.name for p in t.geo_params for b in p.blocks}
    grad_to_block, sparse_to_param, blocks = [], [], []
    for pb in t.ep_params[endpoint]:
        param = _declare(g, src.var(owner[pb.name]), pb.name, pb.shape, persistable=True)
        sparse = owner[pb.name] in t.geo_sparse
        delta = g.create_var(name=f"{pb.name}.delta", shape=pb.shape, dtype=param.dtype,
                             persistable=False, type="SELECTED_ROWS" if sparse else param.type)
        block = _new_block(prog, prog.num_blocks - 1)
        block.append_op("sum", {"X": [param.name, delta.name]}, {"Out": [param.name]},
                        role=OpRole.OPTIMIZE)
        grad_to_block.append(f"{delta.name}:{block.idx}")
        if sparse:
            sparse_to_param.append(f"{delta.name}:{param.name}")
        blocks.append(block.idx)
    if not blocks:
        blocks.append(_new_block(prog, prog.num_blocks - 1).idx)
    g.append_op("listen_and_serv", {"X": []}, {}, {
        "optimize_blocks": blocks, "endpoint": endpoint,
        "pserver_id": t.endpoints.index(endpoint), "Fanin": t.trainer_num,
        "distributed_mode": GEO, "grad_to_block_id": grad_to_block,
        "sparse_grad_to_param": sparse_to_param, "lr_decay_block_id": -1,
        "dc_asgd": False}, role=OpRole.COMMUNICATE)
    return prog
