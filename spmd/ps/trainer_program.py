"""The trainer side of parameter-server mode, rewritten in place as fluid 1.8 does: after the
op that last writes a gradient (or the update ops that read it, which leave), the gradient is
cut into its blocks (split_byref, or split_selected_rows for a sparse one) and sent; in sync
mode a send_barrier follows every send; then each parameter's blocks are received, a
fetch_barrier waits for all of them, and a concat joins the blocks of a sliced parameter. The
startup program receives the pservers' initial parameters the same way.
"""
from __future__ import annotations

from ..core import unique_name
from ..core.operator import OpRole
from ..errors import InvalidArgumentError
from .analysis import LOOKUP_TYPES


def control_var(block):
    """A dependency marker between the communication ops (fluid's __control_var@...)."""
    return block.create_var(name=unique_name.generate("__control_var"), shape=(),
                            dtype="float32", type="RAW")


def rename_var(block, old: str, new: str) -> None:
    """Rename `old` to `new` in the block's variables and ops and the program's grad map."""
    var = block.vars.pop(old)
    var.name = new
    block.vars[new] = var
    for op in block.ops:
        for slots in (op.inputs, op.outputs):
            for slot, names in slots.items():
                slots[slot] = [new if n == old else n for n in names]
    gm = block.program.grad_var_map
    for k, v in list(gm.items()):
        if v == old:
            gm[k] = new
    block.program._bump()


def _last_writer(block, names: set, extra_ops) -> int:
    extra = {id(op) for op in extra_ops}
    idx = [i for i, op in enumerate(block.ops)
           if id(op) in extra or set(op.output_arg_names) & names]
    if not idx:
        raise InvalidArgumentError(
            f"DistributeTranspiler: no op of the trainer program writes {sorted(names)}")
    return idx[-1]


def insert_sends(t, block) -> dict:
    """split + send after each gradient; returns grad name -> its send's control output."""
    dummies = {}
    for grad, blocks in t.grad_order:
        upd = t.update_by_grad[grad]
        sent = t.sent_grad_name[grad]
        # after the gradient's last writer, or after the update ops that read it (its
        # regularization, which fluid 1.8 writes in place into the gradient): they leave
        index = _last_writer(block, {sent}, [op for op in upd.ops if op is not upd.optimizer])
        eplist = t.dispatcher.dispatch(blocks)
        if len(blocks) > 1 and not t.config.runtime_split_send_recv:
            sections = [b.shape[0] for b in blocks]
            if t.sparse_grads.get(grad):
                block._insert_op(index + 1, "split_selected_rows", {"X": [sent]},
                                 {"Out": [b.name for b in blocks]},
                                 {"height_sections": sections}, role=OpRole.COMMUNICATE)
            else:
                block._insert_op(index + 1, "split_byref", {"X": [sent]},
                                 {"Out": [b.name for b in blocks]}, {"sections": sections},
                                 role=OpRole.COMMUNICATE)
            index += 1
        if t.sparse_grads.get(grad) and upd.param in t.remote_tables:
            t.height_sections[upd.param] = [b.shape[0] for b in blocks]
        out = control_var(block)
        dummies[grad] = out.name
        if t.config.runtime_split_send_recv:
            xs, sections = [sent], [b.shape[0] for b in blocks]
            names = [b.name for b in blocks]
        else:
            xs, sections, names = [b.name for b in blocks], [], []
        block._insert_op(index + 1, "send", {"X": xs}, {"Out": [out.name]},
                         {"epmap": eplist, "sections": sections, "send_varnames": names,
                          "trainer_id": t.trainer_id}, role=OpRole.COMMUNICATE)
        t.send_blocks.extend(blocks)
    return dummies


def insert_recvs(t, block, dummies: dict) -> None:
    """send_barrier, recv per parameter, fetch_barrier, concat (fluid's order)."""
    deps = list(dummies.values())
    if t.counter_send is not None:
        deps.append(t.counter_send)
    barrier = None
    if t.sync_mode:
        barrier = control_var(block).name
        block.append_op("send_barrier", {"X": deps}, {"Out": [barrier]},
                        {"endpoints": t.endpoints, "trainer_id": t.trainer_id},
                        role=OpRole.COMMUNICATE)
    outputs = []
    for param, blocks in t.param_blocks.items():
        if param in t.height_sections:
            continue  # rows are prefetched by distributed_lookup_table instead
        eps = [t.block_endpoint[b.name] for b in blocks]
        dep = barrier if t.sync_mode else dummies[t.grad_of_param[param]]
        outs, names = [b.name for b in blocks], []
        if t.config.runtime_split_send_recv:
            outs, names = [param], [b.name for b in blocks]
        outputs.extend(outs)
        block.append_op("recv", {"X": [dep]}, {"Out": outs},
                        {"epmap": eps, "recv_varnames": names, "trainer_id": t.trainer_id},
                        role=OpRole.COMMUNICATE)
    replace_remote_lookups(t, block)
    if t.sync_mode:
        block.append_op("fetch_barrier", {"X": [barrier]}, {"Out": outputs},
                        {"endpoints": t.endpoints, "trainer_id": t.trainer_id},
                        role=OpRole.COMMUNICATE)
    if not t.config.runtime_split_send_recv:
        for param, blocks in t.param_blocks.items():
            if len(blocks) > 1 and param not in t.height_sections:
                block.append_op("concat", {"X": [b.name for b in blocks]}, {"Out": [param]},
                                {"axis": 0}, role=OpRole.COMMUNICATE)


def replace_remote_lookups(t, block) -> None:
    """The lookups of a table whose rows the pservers hold become one
    distributed_lookup_table, placed after their ids are made and before their outputs are
    read (fluid's _update_remote_sparse_update_op)."""
    for param, sections in t.height_sections.items():
        ops = [op for op in block.ops if op.type in LOOKUP_TYPES and op.input("W") == [param]]
        if not ops:
            continue
        ids = [op.input("Ids")[0] for op in ops]
        outs = [op.output("Out")[0] for op in ops]
        padding, version = ops[0].attrs.get("padding_idx", -1), ops[0].type
        for op in ops:
            block._remove_op(block.ops.index(op))
        after_ids = max((i for i, op in enumerate(block.ops)
                         if set(op.output_arg_names) & set(ids)), default=-1)
        first_use = min((i for i, op in enumerate(block.ops)
                         if set(op.input_arg_names) & set(outs)), default=len(block.ops))
        if first_use <= after_ids:
            raise InvalidArgumentError(
                f"DistributeTranspiler: the lookups of table '{param}' read ids made after "
                f"their outputs are used; cannot place their distributed_lookup_table")
        blocks = t.param_blocks[param]
        block._insert_op(after_ids + 1, "distributed_lookup_table",
                         {"Ids": ids, "W": [param]}, {"Outputs": outs},
                         {"table_names": [b.name for b in blocks], "height_sections": sections,
                          "endpoints": [t.block_endpoint[b.name] for b in blocks],
                          "padding_idx": padding, "trainer_id": t.trainer_id,
                          "lookup_table_version": version}, role=OpRole.FORWARD)


def rewrite_startup(t, startup, main_block) -> None:
    """Receive every parameter (but the sparse tables) from the pservers after initializing."""
    sb = startup.global_block()
    sparse = t.sparse_tables
    for param, blocks in t.param_blocks.items():
        if param in sparse:
            continue
        for b in blocks:
            if not sb.has_var(b.name):
                src = main_block.var(param)
                sb.create_var(name=b.name, shape=b.shape, dtype=src.dtype, persistable=False)
        sb.append_op("recv", {"X": []}, {"Out": [b.name for b in blocks]},
                     {"epmap": [t.block_endpoint[b.name] for b in blocks],
                      "trainer_id": t.trainer_id}, role=OpRole.COMMUNICATE)
    sb.append_op("fetch_barrier", {}, {"Out": [control_var(sb).name]},
                 {"endpoints": t.endpoints, "trainer_id": t.trainer_id},
                 role=OpRole.COMMUNICATE)
    for param, blocks in t.param_blocks.items():
        if param in sparse or len(blocks) <= 1:
            continue
        if not sb.has_var(param):
            src = main_block.var(param)
            sb.create_var(name=param, shape=src.shape, dtype=src.dtype,
                          persistable=src.persistable)
        sb.append_op("concat", {"X": [b.name for b in blocks]}, {"Out": [param]},
                     {"axis": 0}, role=OpRole.COMMUNICATE)


def strip_optimizer(t, main, startup) -> None:
    """get_trainer_program: the updates, the learning-rate ops and what only they use leave
    the trainer; the sparse tables' initializers become fake_init."""
    block, sb = main.global_block(), startup.global_block()
    gone = {id(op) for op in t.analysis.optimize_ops + t.analysis.lr_ops}
    removed = [op for op in block.ops if id(op) in gone]
    block.ops = [op for op in block.ops if id(op) not in gone]
    still_used = {n for op in block.ops for n in op.input_arg_names + op.output_arg_names}
    # what only the updates read (state, the rate, regularization terms); the learning-rate
    # counter stays declared and initialized, as in fluid
    updates = {id(op) for op in t.analysis.optimize_ops}
    only_theirs = {n for op in removed if id(op) in updates for n in op.input_arg_names
                   if n not in still_used and n not in t.param_blocks}
    only_theirs -= {t.sent_grad_name[g] for g in t.sent_grad_name}
    for name in only_theirs:
        block.vars.pop(name, None)
    sb.ops = [op for op in sb.ops if not set(op.output_arg_names) & only_theirs]
    for name in only_theirs:
        sb.vars.pop(name, None)
    for table in sorted(t.sparse_tables):
        inits = [op for op in sb.ops if table in op.output_arg_names]
        if len(inits) != 1:
            raise InvalidArgumentError(
                f"DistributeTranspiler: sparse table '{table}' should have one initializer in "
                f"the startup program, found {len(inits)}")
        sb.ops.remove(inits[0])
        sb.append_op("fake_init", {}, {"Out": [table]},
                     {"shape": list(sb.var(table).shape)}, role=OpRole.FORWARD)
    main._bump()
    startup._bump()
