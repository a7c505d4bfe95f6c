"""The pserver side of parameter-server mode (fluid 1.8's get_pserver_program and
get_startup_program): block 0 declares the pserver's parameter blocks, their gradients (one
per trainer in sync mode) and one `listen_and_serv` op; block 1 is the learning-rate schedule
when there is one; then one optimize block per parameter block the pserver owns: in sync mode
the trainers' gradients summed and averaged, then the parameter's own update ops (its
regularization, its optimizer op) on the slice, with the optimizer's state sliced alike.
"""
from __future__ import annotations

import warnings

from ..core import unique_name
from ..core.operator import OpRole
from ..core.program import Program
from ..errors import InvalidArgumentError
from ..ops.registry import get_op_def
from .analysis import is_sparse_grad
from .slicing import slice_variable, varname_parts

# initializers whose `shape` attribute follows their output onto a slice
_SHAPED_INITS = ("gaussian_random", "fill_constant", "uniform_random",
                 "truncated_gaussian_random")


def _declare(block, src_var, name=None, shape=None, persistable=None):
    """`name` (default src's) in `block`, declared like `src_var` unless told otherwise."""
    name = name or src_var.name
    if block.has_var(name):
        return block.var(name)
    return block.create_var(
        name=name, shape=src_var.shape if shape is None else shape, dtype=src_var.dtype,
        persistable=src_var.persistable if persistable is None else persistable,
        lod_level=src_var.lod_level, type=src_var.type)


def _clone_op(t, block, op, rename=None, shapes=None):
    """Append a copy of origin op `op` to `block`, names mapped by `rename`; variables it
    uses are declared in the pserver's global block as in the origin program (a slice's
    shape where `shapes` says)."""
    rename, shapes = rename or {}, shapes or {}
    g, src = block.program.global_block(), t.origin.global_block()
    slots = []
    for d in (op.inputs, op.outputs):
        slots.append({k: [rename.get(n, n) for n in names] for k, names in d.items()})
        for names in d.values():
            for n in names:
                new = rename.get(n, n)
                if block._find_var_recursive(new) is None:
                    _declare(g, src._var_recursive(n), new, shapes.get(n))
    attrs = {k: v for k, v in op.attrs.items()}
    return block.append_op(op.type, slots[0], slots[1], attrs, role=op.role)


def _new_block(prog, parent: int):
    block = prog._create_block(parent)
    while prog.current_block().idx != 0:
        prog._rollback()
    return block


def _clone_lr_ops(t, prog) -> int:
    lr_ops = t.origin_analysis.lr_ops
    if not lr_ops:
        return -1
    block = _new_block(prog, 0)
    g = prog.global_block()
    for op in lr_ops:
        if t.counter_name and op.type == "increment" and op.output("Out") == [t.counter_name]:
            # async: the counter is the sum of what each trainer sent (fluid's scheme)
            counter = t.origin.global_block().var(t.counter_name)
            parts = [_declare(g, counter, f"{t.counter_name}.trainer_{i}").name
                     for i in range(t.trainer_num)]
            _declare(g, counter)
            block.append_op("sum", {"X": parts}, {"Out": [t.counter_name]},
                            role=OpRole.LR_SCHED)
            continue
        if "sub_block" in op.attrs:
            raise InvalidArgumentError(
                f"DistributeTranspiler: learning-rate op '{op.type}' runs a sub-block; "
                f"schedules built from control flow cannot move to the pservers here; use "
                f"a fluid.layers schedule (exponential_decay, piecewise_decay, ...)")
        _clone_op(t, block, op)
    return block.idx


def _grad_merge(t, block, merged: str) -> None:
    """Sync mode: the trainers' gradients averaged (fluid's sum then scale by 1/trainers)."""
    if not t.sync_mode:
        return
    parts = [f"{merged}.trainer_{i}" for i in range(t.trainer_num)]
    block.append_op("sum", {"X": parts}, {"Out": [merged]}, role=OpRole.OPTIMIZE)
    block.append_op("scale", {"X": [merged]}, {"Out": [merged]},
                    {"scale": 1.0 / t.trainer_num}, role=OpRole.OPTIMIZE)


def _dc_asgd(t, block, pb, grad: str) -> str:
    """DC-ASGD's delay compensation: grad + grad * grad * (param - the sender's backup)."""
    g = block.program.global_block()
    param = g.var(pb.name)
    local = g.create_var(name=f"{pb.name}.local_bak", shape=pb.shape, dtype=param.dtype)
    trainer = g.create_var(name="@TRAINER_ID@", shape=(1,), dtype="int64")
    baks = [f"{pb.name}.trainer_{i}_bak" for i in range(t.trainer_num)]
    block.append_op("ref_by_trainer_id", {"X": baks, "TrainerId": [trainer.name]},
                    {"Out": [local.name]}, role=OpRole.OPTIMIZE)
    prev = None
    for kind, x, y in (("elementwise_sub", pb.name, local.name), ("elementwise_mul", None, grad),
                       ("elementwise_mul", None, grad), ("elementwise_add", grad, None)):
        out = g.create_var(name=unique_name.generate("tmp_dc_output"), shape=pb.shape,
                           dtype=param.dtype).name
        block.append_op(kind, {"X": [x or prev], "Y": [y or prev]}, {"Out": [out]},
                        role=OpRole.OPTIMIZE)
        prev = out
    return prev


def _optimize_block(t, prog, parent, upd, pb, gb, grad_to_block, sparse_to_param,
                    own_state=False):
    """`own_state`: another block of the same parameter is updated on this pserver too, so
    this block's optimizer state (moments, beta powers, ...) gets its own variables,
    `<state>.blockN` (fluid 1.8 names the state of every block of a parameter alike, so two
    blocks on one pserver would share one slice's moments and advance its powers twice)."""
    block = _new_block(prog, parent)
    merged = ".".join(p for p in varname_parts(gb.name)[:2] if p)
    grad_to_block.append(f"{merged}:{block.idx}")
    _grad_merge(t, block, merged)
    full = t.origin.global_block().var(upd.param)
    sliced = tuple(pb.shape) != tuple(full.shape)
    rename = {upd.param: pb.name, upd.grad: merged, **dict.fromkeys(upd.aliases, merged)}
    own = set()
    if own_state:
        index = varname_parts(pb.name)[1]
        for slot, names in upd.optimizer.inputs.items():
            if slot not in ("Param", "Grad", "LearningRate"):
                own.update(names)
        rename.update({n: f"{n}.{index}" for n in own})
    shapes = {}
    for op in upd.ops:
        for _slot, names in op.inputs.items():
            for n in names:
                v = t.origin.global_block()._var_recursive(n)
                if (n not in rename or n in own) and tuple(v.shape) == tuple(full.shape):
                    shapes[n] = pb.shape  # optimizer state and temporaries shaped like it
        if sliced and not get_op_def(op.type).row_separable:
            raise InvalidArgumentError(
                f"DistributeTranspiler: parameter '{upd.param}' is cut into blocks across "
                f"pservers but its update op '{op.type}' is not row-separable (it reads the "
                f"whole parameter); set DistributeTranspilerConfig.slice_var_up = False "
                f"(or a larger min_block_size) so each parameter stays whole on one pserver")
        if op is upd.optimizer and t.config.enable_dc_asgd and not is_sparse_grad(
                t.origin.global_block(), upd.grad):  # rows: no dense (param - backup) term
            rename = dict(rename, **{op.input("Grad")[0]: _dc_asgd(
                t, block, pb, rename.get(op.input("Grad")[0], op.input("Grad")[0]))})
        _clone_op(t, block, op, rename, shapes)
    if is_sparse_grad(t.origin.global_block(), upd.grad):
        sparse_to_param.append(f"{rename.get(upd.optimizer.input('Grad')[0])}:{pb.name}")
    return block


def build_pserver_program(t, endpoint: str) -> Program:
    prog = Program()
    prog.random_seed = t.origin.random_seed
    g, src = prog.global_block(), t.origin.global_block()
    params, grads = t.ep_params[endpoint], t.ep_grads[endpoint]
    for pb in params:
        _declare(g, src.var(varname_parts(pb.name)[0]), pb.name, pb.shape, persistable=True)
    recv_inputs = []
    for gb in grads:
        orig = varname_parts(gb.name)[0]
        merged = ".".join(p for p in varname_parts(gb.name)[:2] if p)
        ref = src.var(t.grad_source[orig])
        _declare(g, ref, merged, gb.shape, persistable=True)
        if t.sync_mode:
            for i in range(t.trainer_num):
                recv_inputs.append(
                    _declare(g, ref, f"{merged}.trainer_{i}", gb.shape, persistable=False).name)
        else:
            recv_inputs.append(merged)
    if t.config.enable_dc_asgd:
        for pb in params:
            for i in range(t.trainer_num):
                _declare(g, g.var(pb.name), f"{pb.name}.trainer_{i}_bak", persistable=True)
    lr_block = _clone_lr_ops(t, prog)
    optimize_blocks = [lr_block] if lr_block >= 0 else []
    parent = prog.num_blocks - 1
    grad_to_block, sparse_to_param = [], []
    for upd in t.origin_analysis.updates:
        mine = [pb for pb in params
                if varname_parts(pb.name)[0] == upd.param and pb.name in t.grad_of_block]
        for pb in mine:
            gb = t.grad_of_block[pb.name]
            block = _optimize_block(t, prog, parent, upd, pb, gb, grad_to_block,
                                    sparse_to_param, own_state=len(mine) > 1)
            optimize_blocks.append(block.idx)
    if not optimize_blocks:
        warnings.warn(f"DistributeTranspiler: pserver {endpoint} has no optimize block (no "
                      f"parameter block was placed on it)", stacklevel=3)
        optimize_blocks.append(_new_block(prog, prog.num_blocks - 1).idx)
    g.append_op("listen_and_serv", {"X": recv_inputs}, {}, {
        "optimize_blocks": optimize_blocks, "endpoint": endpoint,
        "pserver_id": t.endpoints.index(endpoint), "Fanin": t.trainer_num,
        "distributed_mode": t.distributed_mode, "grad_to_block_id": grad_to_block,
        "sparse_grad_to_param": sparse_to_param, "lr_decay_block_id": lr_block,
        "dc_asgd": bool(t.config.enable_dc_asgd)}, role=OpRole.COMMUNICATE)
    return prog


def _block_rows(t, name: str) -> slice:
    """The rows of the whole variable that block `name` (<var>.blockN) holds, cut as the
    transpiler cut it (slicing.py)."""
    orig, block, _ = varname_parts(name)
    index = int(block.removeprefix("block"))
    shape = t.origin_startup.global_block().var(orig).shape
    count = len(t.endpoints) if t.config.slice_var_up else 1
    blocks = slice_variable([(orig, shape)], count, t.config.min_block_size)
    start = sum(b.rows for b in blocks[:index])
    return slice(start, start + blocks[index].rows)


def _values_of_block(t, attrs, block_name: str) -> dict:
    """assign_value's attributes (NumpyArrayInitializer's values, given for the whole
    variable) cut to the rows of one block: the pserver holding the block starts from the
    whole variable's values there. fluid 1.8.5 copies the whole array into the block and
    then fails in the block's optimizer op (shape mismatch)."""
    attrs = dict(attrs)
    key = next(k for k in ("fp32_values", "int32_values", "int64_values", "bool_values")
               if attrs.get(k))
    whole = list(attrs["shape"])
    width = 1
    for d in whole[1:]:
        width *= int(d)
    rows = _block_rows(t, block_name)
    attrs[key] = list(attrs[key][rows.start * width:rows.stop * width])
    attrs["shape"] = [rows.stop - rows.start] + whole[1:]
    return attrs


def _append_init(t, sg, op, outputs):
    attrs = dict(op.attrs)
    if op.type in _SHAPED_INITS and "Out" in outputs:
        attrs["shape"] = list(sg.var(outputs["Out"][0]).shape)
    out = outputs.get("Out", [None])[0]
    if op.type == "assign_value" and out is not None and varname_parts(out)[1] \
            and list(sg.var(out).shape) != list(attrs["shape"]):
        attrs = _values_of_block(t, attrs, out)
    if t.counter_name and outputs.get("Out") == [t.counter_name]:
        attrs["value"] = float(-t.trainer_num)
    for names in list(op.inputs.values()) + list(outputs.values()):
        for n in names:
            if not sg.has_var(n):
                _declare(sg, t.origin_startup.global_block().var(n))
    sg.append_op(op.type, {k: list(v) for k, v in op.inputs.items()}, outputs, attrs,
                 role=op.role)


def build_pserver_startup(t, endpoint: str, pserver_program: Program) -> Program:
    """The origin startup's initializers of what this pserver holds, a sliced parameter's
    initializer shaped like its slice (with the same attributes otherwise)."""
    s = Program()
    s.random_seed = t.origin_startup.random_seed
    sg, pvars = s.global_block(), pserver_program.global_block().vars
    for var in pvars.values():
        _declare(sg, var)
    sliced: dict[str, list] = {}
    for pb in t.ep_params[endpoint]:
        if varname_parts(pb.name)[1]:
            sliced.setdefault(varname_parts(pb.name)[0], []).append(pb)
    # the optimizer state a block has of its own (<state>.blockN, _optimize_block's
    # own_state), initialized as the origin state is
    for name in pvars:
        orig, index, trainer = varname_parts(name)
        if index and not trainer and orig not in t.param_blocks and "@GRAD" not in orig:
            sliced.setdefault(orig, []).append(pserver_program.global_block().var(name))
    for op in t.origin_startup.global_block().ops:
        firsts = [names[0] for names in op.outputs.values() if names]
        blocks = next((sliced[n] for n in firsts if n in sliced), None)
        if blocks is not None:  # one initializer per block held here, shaped like it
            for pb in blocks:
                _append_init(t, sg, op, {k: [pb.name] if v and v[0] in sliced else list(v)
                                         for k, v in op.outputs.items()})
        elif any(n in pvars for n in firsts):
            _append_init(t, sg, op, {k: list(v) for k, v in op.outputs.items()})
    if t.counter_name:
        for i in range(t.trainer_num):
            name = f"{t.counter_name}.trainer_{i}"
            if sg.has_var(name):
                var = sg.var(name)  # prepended, as fluid 1.8.5 (trainer_1's, trainer_0's, ...)
                sg._prepend_op("fill_constant", {}, {"Out": [name]},
                               {"shape": list(var.shape), "dtype": var.dtype, "value": 1.0})
    if t.config.enable_dc_asgd:
        for pb in t.ep_params[endpoint]:
            for i in range(t.trainer_num):
                sg.append_op("assign", {"X": [pb.name]}, {"Out": [f"{pb.name}.trainer_{i}_bak"]})
    return s
