"""What the parameter-server transpiler reads off a trained program: the learning-rate ops, the
update of each parameter (its optimizer op and the ops that feed it, such as regularization),
the ops that stay on the trainer (gradient clipping), and the gradient each trainer sends.

An optimize-role op runs on the pserver when it reads a parameter, an optimizer's state, or
what such an op wrote (regularization reads the parameter; the optimizer op its state); one
that reads only gradients and constants (clipping) stays on the trainer, as fluid 1.8 keeps
its "gradient_clip" ops. The gradient a trainer sends for a parameter is the value its
pserver chain reads from the trainer side: the raw gradient, or the clipped one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.operator import OpRole
from ..errors import InvalidArgumentError

LOOKUP_TYPES = ("lookup_table", "lookup_table_v2")
SPARSE_GRAD_MAKERS = ("lookup_table_grad", "lookup_table_v2_grad", "nce_grad",
                      "hierarchical_sigmoid_grad")


def is_optimizer_op(op) -> bool:
    """fluid's rule: an update op reads a Param and a LearningRate."""
    return "Param" in op.inputs and "LearningRate" in op.inputs


@dataclass
class ParamUpdate:
    """The update of one parameter: `ops` in program order, the optimizer op last among them
    that has Param; `grad` the variable the trainer sends. `optimizer` None: a parameter an op
    updates itself (distribute_update_vars), `grad` the parameter."""

    param: str
    grad: str
    optimizer: object
    ops: list = field(default_factory=list)
    # a parameter updated by more than one optimizer op (minimize called twice): the later
    # ops' own gradients, which the pserver reads as `grad`, the one the trainer sends
    aliases: set = field(default_factory=set)


@dataclass
class ProgramAnalysis:
    updates: list  # ParamUpdate, in the order of the optimizer ops
    lr_ops: list  # LR_SCHED ops, in program order
    trainer_optimize_ops: list  # optimize-role ops that stay on the trainer (clipping)
    optimize_ops: list  # every optimize-role op that moves to the pservers


def analyze(program) -> ProgramAnalysis:
    block = program.global_block()
    opt_ops = [op for op in block.ops if op.role is OpRole.OPTIMIZE]
    lr_ops = [op for op in block.ops if op.role is OpRole.LR_SCHED]
    updaters = [op for op in opt_ops if is_optimizer_op(op)]
    self_updated = distribute_update_vars(block)
    if not updaters and not self_updated:
        raise InvalidArgumentError(
            "DistributeTranspiler: the program has no optimizer op (an op with Param and "
            "LearningRate inputs); call optimizer.minimize(loss) before transpile()")
    params = {op.input("Param")[0] for op in updaters}
    state = {n for op in updaters for slot, names in op.inputs.items()
             if slot not in ("Param", "Grad", "LearningRate") for n in names}
    tainted = set(params) | state
    server_side = []
    for op in opt_ops:
        if is_optimizer_op(op) or set(op.input_arg_names) & tainted:
            server_side.append(op)
            tainted |= set(op.output_arg_names) - params
    on_server = {id(op) for op in server_side}
    # a parameter's own learning rate (ParamAttr(learning_rate=...): the global rate scaled)
    # is computed where its update runs, on the pserver, as in fluid's optimize blocks
    rates = {n for op in updaters for n in op.input("LearningRate")}
    for op in reversed(opt_ops):
        if id(op) not in on_server and set(op.output_arg_names) & rates:
            on_server.add(id(op))
            rates |= set(op.input_arg_names)
    server_side = [op for op in opt_ops if id(op) in on_server]
    trainer_side = [op for op in opt_ops if id(op) not in on_server]
    updates = _one_update_per_param([_update_of(op, server_side, tainted) for op in updaters])
    # fluid's _get_distribute_update_vars: (param, param) pairs after the optimizers' ones
    updated = {u.param for u in updates}
    updates += [ParamUpdate(n, n, None) for n in self_updated if n not in updated]
    return ProgramAnalysis(updates, lr_ops, trainer_side, server_side)


def distribute_update_vars(block) -> list[str]:
    """Parameters an op updates itself in its backward pass, named by its
    `distribute_update_vars` attribute ("a,b": search_pyramid_hash's embedding), in order:
    no optimizer op updates them, and fluid 1.8's transpiler distributes them as parameters
    whose "gradient" is the parameter itself (Geo-SGD pushes their deltas)."""
    names: list[str] = []
    for op in block.ops:
        for n in str(op.attrs.get("distribute_update_vars") or "").split(","):
            if n and n not in names:
                if not block.has_var(n):
                    raise InvalidArgumentError(
                        f"DistributeTranspiler: op '{op.type}' lists '{n}' in "
                        f"distribute_update_vars but the program has no such variable")
                names.append(n)
    return names


def _one_update_per_param(updates: list) -> list:
    """fluid 1.8's transpiler keeps the first (param, grad) pair of a parameter that several
    optimizer ops update (minimize called twice on one program): the trainer sends that
    gradient, and the pserver runs every one of those ops, in program order, on it."""
    first: dict = {}
    for u in updates:
        kept = first.setdefault(u.param, u)
        if kept is u:
            continue
        chain = [op for op in u.ops if all(op is not o for o in kept.ops)]
        kept.ops.extend(chain)
        kept.aliases.add(u.grad)
        kept.aliases.update(n for op in chain for n in op.input("Grad") if n != kept.grad)
    return list(first.values())


def _update_of(updater, server_side, tainted) -> ParamUpdate:
    """The server-side ops the updater depends on, walking back from it."""
    param = updater.input("Param")[0]
    needed = set(updater.input_arg_names) - {param}
    chain = [updater]
    for op in reversed(server_side[:server_side.index(updater)]):
        if is_optimizer_op(op):
            continue
        if set(op.output_arg_names) & needed:
            chain.insert(0, op)
            needed |= set(op.input_arg_names) - {param}
    # the gradient sent: what the chain reads that the trainer side produced
    lr = set(updater.input("LearningRate"))
    for op in reversed(chain):  # and what a per-parameter rate is computed from
        if set(op.output_arg_names) & lr:
            lr |= set(op.input_arg_names)
    produced = {n for op in chain for n in op.output_arg_names}
    grad = updater.input("Grad")[0]
    if grad in produced:
        outside = [n for op in chain for n in op.input_arg_names
                   if n not in produced and n not in tainted and n not in lr]
        if len(set(outside)) != 1:
            raise InvalidArgumentError(
                f"DistributeTranspiler: cannot tell which gradient of parameter '{param}' the "
                f"trainer sends: its update ops {[op.type for op in chain]} read "
                f"{sorted(set(outside))} from the trainer side (expected one gradient)")
        grad = outside[0]
    return ParamUpdate(param, grad, updater, chain)


def is_sparse_grad(block, grad: str, _depth: int = 0) -> bool:
    """A SelectedRows gradient: declared so, written by a sparse lookup's grad op, or the sum
    of such gradients (a table several lookups share, as word2vec's: fluid's sum of
    SelectedRows is SelectedRows, so the table stays a remote-prefetch sparse one)."""
    var = block._find_var_recursive(grad)
    if var is not None and var.type == "SELECTED_ROWS":
        return True
    for op in block.ops:
        if grad not in op.output_arg_names:
            continue
        if op.type in SPARSE_GRAD_MAKERS and op.attrs.get("is_sparse", False):
            return True
        if op.type == "sum" and _depth < 8 and op.input("X") and all(
                is_sparse_grad(block, x, _depth + 1) for x in op.input("X")):
            return True
    return False


def remote_prefetch_tables(block) -> dict[str, list]:
    """Tables read by lookups that prefetch their rows from the pservers -> those ops.
    fluid 1.8.5's embedding sets remote_prefetch = is_sparse and not is_distributed; an op
    built without that attribute set is read the same way, and is_distributed tables are
    prefetched too (the transpiler makes their lookups sparse remote-prefetch ones)."""
    tables: dict[str, list] = {}
    for op in block.ops:
        if op.type in LOOKUP_TYPES and (
                op.attrs.get("remote_prefetch", False) or op.attrs.get("is_sparse", False)):
            tables.setdefault(op.input("W")[0], []).append(op)
    return tables


def sparse_table_names(block) -> set[str]:
    """fluid's _get_sparse_table_names: tables of is_sparse lookups (and nce): the trainer's
    startup only declares them (fake_init), the pservers initialize them."""
    return {op.input("W")[0] for op in block.ops
            if op.type in LOOKUP_TYPES + ("nce",) and op.attrs.get("is_sparse", False)}


def distributed_tables(block) -> list[str]:
    return sorted({op.input("W")[0] for op in block.ops
                   if op.type in LOOKUP_TYPES and op.attrs.get("is_distributed", False)})
