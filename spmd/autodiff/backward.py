"""append_backward and gradients: the reverse walk that appends grad ops to a program.

Each forward op on the path from the targets back to the inputs gets its grad ops from its
definition's grad maker (spmd/ops). Every gradient contribution is first written to its own
name; a variable with one contribution gets it renamed to `x@GRAD`, one with several gets a `sum`
op, placed before the first grad op that reads `x@GRAD`. The result is recorded in the explicit
map `program.grad_var_map` (var name -> grad name).

A pass walks the grad ops of earlier passes too (gradients of gradients: their grad makers are
in double_grad.py); what it makes is named apart from the names the block already has
(`grad/grad/x@GRAD`), so its ops still read the earlier pass's `x@GRAD` as a value.

append_backward called inside a branch (fluid 1.8's minimize in a layers.cond / case function)
differentiates the loss through the branch's block and the blocks enclosing it and appends the
grad ops to the branch's block, where the optimizer's updates follow them: they run only when
the branch is taken. (fluid puts them in a separate backward block that a conditional_block_grad
runs under the branch's condition; the branch's block here holds the forward values they read.)
"""
from __future__ import annotations

import warnings
from collections import defaultdict

from ..core.operator import OpRole
from ..core.variable import Parameter, Variable
from ..errors import ArgumentTypeError, InvalidArgumentError, UnimplementedError
from ..ops.registry import GRAD_SUFFIX, get_op_def, grad_var_name
from .overwritten import OverwrittenValues


class GradContext:
    """What a grad maker sees: where each forward var's gradient is read from or written to.

    A name may be written more than once (an in-place op, a loop's outputs): the walk keeps
    one gradient per version of the value, so `in_grad` of an op's input and `out_grad` of its
    output are different gradients even when the two are the same name."""

    def __init__(self, needs_grad: set, finalize, block, no_grad: set | frozenset = frozenset(),
                 fresh=None):
        self._needs_grad = needs_grad
        # a name for a variable the pass makes, kept apart from the block's existing ones
        self.fresh = fresh or (lambda name: name)
        self._finalize = finalize
        self._contrib: dict[tuple, list[str]] = defaultdict(list)
        self._counts: dict[str, int] = defaultdict(int)
        self._zero_specs: list = []
        self.block = block
        self.no_grad = no_grad
        self.grad_of: dict[str, str] = {}  # every gradient name made -> its forward var
        self._asked: list[tuple] = []  # (key, contribution name) in the order in_grad gave
        self._version: dict[str, int] = {}  # name -> version the walk stands at
        self._after: dict[str, int] = {}  # outputs of the op being differentiated

    def _key(self, name: str, read: bool) -> tuple:
        v = self._version.get(name, 0)
        if name in self._after:
            v = self._after[name] - 1 if read else self._after[name]
        return name, v

    def in_grad(self, name: str) -> str | None:
        """A fresh name to write one gradient contribution of forward input `name` to, or None
        when `name` needs no gradient."""
        if name not in self._needs_grad:
            return None
        temp = self.fresh(f"{name}{GRAD_SUFFIX}@RENAME@{self._counts[name]}")
        self._counts[name] += 1
        key = self._key(name, True)
        self._contrib[key].append(temp)
        self._asked.append((key, temp))
        self.grad_of[temp] = name
        return temp

    def drop_unwritten(self, asked: list, specs: list) -> None:
        """Forget the contributions a grad maker asked for (`asked`) but wrote in none of its
        `specs` (a maker asks for its input's gradient name before it finds no output
        gradient): in a pass over earlier grad ops, a forward op whose outputs get no
        gradient is still on the path, and the sum must not read a name nothing writes."""
        written = {n for _, _, outs, _ in specs for names in outs.values() for n in names}
        for key, temp in asked:
            if temp not in written:
                self._contrib[key].remove(temp)
                if not self._contrib[key]:
                    del self._contrib[key]
                del self.grad_of[temp]

    def out_grad(self, name: str) -> str | None:
        """The gradient of forward output `name`, or None when no gradient flows into it."""
        return self._finalize(self._key(name, False))

    def out_grad_or_zeros(self, name: str) -> str:
        """Like out_grad, but a zero gradient (fill_zeros_like) when none flows into `name`."""
        g = self.out_grad(name)
        if g is None:
            g = self.fresh(f"{name}{GRAD_SUFFIX}@ZERO")
            self.grad_of[g] = name
            self._zero_specs.append(("fill_zeros_like", {"X": [name]}, {"Out": [g]}, {}))
        return g


def default_grad_maker(op, ctx: GradContext):
    """`<type>_grad` reading the forward slots and output grads, writing the input grads."""
    opdef = get_op_def(op.type)
    gdef = get_op_def(op.type + "_grad")
    diff_outs = [s for s in opdef.outputs if s.name not in opdef.nondiff_outputs]
    out_grads = {s.name: [ctx.out_grad(n) for n in op.output(s.name)] for s in diff_outs}
    if not any(g for gs in out_grads.values() for g in gs):
        return []
    in_grads = {}
    for s in opdef.inputs:
        if s.name in opdef.no_grad_inputs or not op.input(s.name):
            continue
        names = [ctx.in_grad(n) for n in op.input(s.name)]
        if not any(names):
            continue
        # a duplicable slot writes every element; unneeded ones go to throwaway names
        in_grads[grad_var_name(s.name)] = [
            g or _discard_name(ctx, n, op) for g, n in zip(names, op.input(s.name))]
    if not in_grads:
        return []
    inputs = {s: op.input(s) for s in op.inputs if s in gdef.input_slots}
    inputs.update({s: op.output(s) for s in op.outputs if s in gdef.input_slots})
    for s in diff_outs:
        gs = out_grads[s.name]
        if any(gs):
            if None in gs:
                gs = [ctx.out_grad_or_zeros(n) for n in op.output(s.name)]
            inputs[grad_var_name(s.name)] = gs
    return [(gdef.type, inputs, in_grads, dict(op.attrs))]


def _discard_name(ctx: GradContext, name: str, op) -> str:
    """Where a duplicable grad slot writes the gradient of an element that needs none."""
    g = ctx.fresh(f"{name}{GRAD_SUFFIX}@DISCARD@{op.block.ops.index(op)}")
    ctx.grad_of[g] = name
    return g


# op type -> grad maker of an op that runs a sub-block (control flow): it differentiates the
# block, which needs this module, so it is registered here by spmd/autodiff/control_flow.py
# rather than given as the op definition's `grad=` (ops do not import autodiff)
SUB_BLOCK_GRAD_MAKERS: dict = {}


def _grad_maker(op):
    maker = SUB_BLOCK_GRAD_MAKERS.get(op.type)
    if maker is not None:
        return maker
    if op.type.endswith("_grad"):  # a grad op differentiated again (gradients of gradients)
        from .double_grad import GRAD_OP_GRAD_MAKERS

        maker = GRAD_OP_GRAD_MAKERS.get(op.type)
        if maker is not None:
            return maker
    grad = get_op_def(op.type).grad
    if grad == "default":
        return default_grad_maker
    return grad  # None or a custom maker


def _ancestors_needing_grad(ops, start_vars: set, no_grad: set) -> set:
    """Forward pass: vars whose value depends on a var in `start_vars` (through differentiable
    slots), minus `no_grad`."""
    needs = set(start_vars) - no_grad
    for op in ops:
        opdef = get_op_def(op.type)
        if any(n in needs for s, names in op.inputs.items() if s not in opdef.no_grad_inputs
               for n in names):
            needs.update(n for n in op.output_arg_names if n not in no_grad)
    return needs


def _relevant_ops(ops, targets: set):
    """Ops from which some target is reachable, in forward order."""
    live, keep = set(targets), []
    for op in reversed(ops):
        if any(n in live for n in op.output_arg_names):
            keep.append(op)
            live.update(op.input_arg_names)
    return keep[::-1]


def _write_counts(ops) -> dict[str, int]:
    """How many ops write each name: a value's versions (1 for a program in SSA form)."""
    counts: dict[str, int] = defaultdict(int)
    for op in ops:
        for n in set(op.output_arg_names):
            counts[n] += 1
    return counts


def _first_versions(ops) -> dict[str, int]:
    """name -> the first version of it the ops see: 0 when read before any op writes it (a
    leaf: a parameter, a feed, a loop's initial value), else 1."""
    first: dict[str, int] = {}
    for op in ops:
        for n in op.input_arg_names:
            first.setdefault(n, 0)
        for n in op.output_arg_names:
            first.setdefault(n, 1)
    return first


def accumulate_op(block, name: str) -> str:
    """The op summing gradient contributions of `name`: `sum`, or for a tensor array (its
    gradient is a list of tensors) `sum_tensor_array`."""
    var = block._find_var_recursive(name)
    return "sum_tensor_array" if var is not None and var.type == "LOD_TENSOR_ARRAY" else "sum"


class ReverseWalk:
    """Grad-op specs for `ops`, walked in reverse: each op's grad maker reads the gradients of
    its outputs and adds contributions to those of its inputs; a version of a value whose
    readers have all been passed gets its contributions renamed (one) or summed (several) into
    `name_for((name, version))`. `seeds` gives the gradients flowing into the walk:
    (name, version) -> gradient name; a seeded version that ops of the walk also read gets the
    seed plus their contributions (a loop body's state that the body reads after writing it)."""

    def __init__(self, ops, block, needs: set, no_grad: set, name_for, seeds: dict,
                 saver: OverwrittenValues | None = None, fresh=None):
        self.ops, self.block, self.name_for, self.saver = ops, block, name_for, saver
        self.writes = _write_counts(ops)
        self.specs: list = []
        self.rename: dict[str, str] = {}
        self.seeds = dict(seeds)
        self.finalized: dict[tuple, str | None] = {}
        self.ctx = GradContext(needs, self.finalize, block, no_grad, fresh)

    def finalize(self, key: tuple) -> str | None:
        if key in self.finalized:
            return self.finalized[key]
        contribs = self.ctx._contrib.get(key, [])
        seed = self.seeds.get(key)
        if seed is not None and not contribs:
            self.finalized[key] = seed
            return seed
        final = self.name_for(key) if contribs else None
        if seed is not None:
            if final == seed:  # the sum must not overwrite the seed it reads
                final = self.ctx.fresh(f"{seed}@SUM")
            contribs = [seed, *contribs]
        if len(contribs) == 1:
            self.rename[contribs[0]] = final
        elif len(contribs) > 1:
            self.specs.append((accumulate_op(self.block, key[0]), {"X": list(contribs)},
                               {"Out": [final]}, {}))
        self.finalized[key] = final
        if final is not None:
            self.ctx.grad_of[final] = key[0]
        return final

    def run(self) -> ReverseWalk:
        ctx = self.ctx
        ctx._version = dict(self.writes)
        for op in reversed(self.ops):
            outs = set(op.output_arg_names)
            ctx._after = {n: ctx._version[n] for n in outs}
            maker = _grad_maker(op)
            if maker is None and op.role is OpRole.BACKWARD:
                _refuse_undifferentiable_grad_op(op, ctx)
            if maker is not None:
                asked = len(ctx._asked)
                made = maker(op, ctx)
                ctx.drop_unwritten(ctx._asked[asked:], made)
                if self.saver is not None:
                    made = self.saver.rewrite(op, made)
                self.specs.extend(ctx._zero_specs)
                ctx._zero_specs.clear()
                self.specs.extend(made)
            for n in outs:
                ctx._version[n] -= 1
            ctx._after = {}
        for key in list(ctx._contrib):
            self.finalize(key)
        for key, seed in self.seeds.items():
            self.finalized.setdefault(key, seed)
        return self


# the ops a backward pass walks: the forward ones, and the grad ops of earlier passes, which a
# target may depend on (a gradient penalty, fluid.gradients of a gradient)
_DIFFERENTIATED_ROLES = (OpRole.FORWARD, OpRole.LOSS, OpRole.BACKWARD)


def _refuse_undifferentiable_grad_op(op, ctx: GradContext) -> None:
    """An earlier pass's grad op (`<type>_grad`) on this pass's path, with no grad maker of
    its own: a gradient flows into its outputs and one of its inputs needs one. fluid 1.8
    refuses it (its GradOpMaker is not registered); leaving it out would give a second-order
    gradient that is silently wrong."""
    if not op.type.endswith("_grad") or not any(n in ctx._needs_grad
                                                for n in op.input_arg_names):
        return
    if any(ctx.out_grad(n) is not None for n in op.output_arg_names):
        raise UnimplementedError(
            f"op '{op.type}' (the gradient of {op.type[:-5]}) is on the path of this backward "
            f"pass, but it has no gradient of its own: spmd's gradients of gradients cover "
            f"the ops of spmd/autodiff/double_grad.py (fluid 1.8 refuses this op too). Keep "
            f"{op.type[:-5]} out of the gradient you differentiate, or use an op that has one")


def _backward(block, targets, seed_ops: dict, sources: set, no_grad: set, seed_names=None,
              seed_role=OpRole.BACKWARD, into=None):
    """Append grad ops for `targets`, each seeded by the op in `seed_ops` (target name ->
    (type, inputs, attrs), written to the target's gradient) or, where `seed_names` names one,
    by that existing variable; returns the map var -> grad name for every var that received a
    gradient. `seed_role`: the seed ops' role (append_backward's seed a loss's gradient: LOSS,
    which data parallelism scales; fluid.gradients' seeds are plain backward ops, as fluid's
    calc_gradient makes them, so a gradient penalty's input gradient is not scaled).
    `into`: the block the grad ops go to (a branch's block, see append_backward), whose
    ancestors' ops are differentiated too; None: `block` itself."""
    program = block.program
    in_branch, into = into is not None, block if into is None else into
    target_names = {t.name for t in targets}
    last = max(i for i, op in enumerate(block.ops) if set(op.output_arg_names) & target_names)
    outer = _ancestors(block) if in_branch else []
    fwd_ops = [op for b in outer for op in b.ops if op.role in _DIFFERENTIATED_ROLES]
    fwd_ops += [op for op in block.ops[: last + 1] if op.role in _DIFFERENTIATED_ROLES]
    ops = _relevant_ops(fwd_ops, target_names)
    needs = _ancestors_needing_grad(ops, sources, no_grad)

    writes, first = _write_counts(ops), _first_versions(ops)
    # the gradient named x@GRAD is that of x's first version (a loop's initial value, a leaf),
    # or for a target its last; other versions of a rewritten name get x@GRAD@SSA@<version>
    canon = {n: writes[n] if n in target_names else first.get(n, 0)
             for n in set(writes) | set(first)}
    fresh = _fresh_names(block, into)

    def name_for(key):
        name, version = key
        if version == canon.get(name, 0):
            return fresh(grad_var_name(name))
        return fresh(f"{grad_var_name(name)}@SSA@{version}")

    seed_names = dict(seed_names or {})
    seed_specs = []
    for t in targets:
        if t.name not in seed_names:
            type_, ins, attrs = seed_ops[t.name]
            seed_names[t.name] = fresh(grad_var_name(t.name))
            seed_specs.append((type_, ins, {"Out": [seed_names[t.name]]}, attrs))
    seeds = {(t.name, writes.get(t.name, 0)): seed_names[t.name] for t in targets}
    saver = OverwrittenValues(block)
    walk = ReverseWalk(ops, into, needs, no_grad, name_for, seeds, saver, fresh).run()
    saver.insert_copies()
    specs = seed_specs + walk.specs
    rename, ctx = walk.rename, walk.ctx

    def ren(d):
        return {s: [rename.get(n, n) for n in names] for s, names in d.items()}

    for g, fwd in ctx.grad_of.items():  # declared with the forward var's shape and dtype
        if rename.get(g, g) == g and into._find_var_recursive(g) is None:
            f = block._var_recursive(fwd)
            into.create_var(name=g, shape=f.shape, dtype=f.dtype, type=f.type)
    with program.role_guard(OpRole.BACKWARD):
        for k, (type_, ins, outs, attrs) in enumerate(specs):
            role = seed_role if k < len(seed_specs) else None  # the seeds of target grads
            op = into.append_op(type_, ren(ins), ren(outs), attrs, role=role)
            _append_error_clips(into, op, ctx.grad_of)
    grads = {key[0]: rename.get(g, g) for key, g in walk.finalized.items()
             if g is not None and key[1] == canon.get(key[0], 0)}
    if not in_branch:  # a branch's gradients live in its block only
        for n, g in grads.items():  # left open to gradients, as fluid's: a later pass may
            program.grad_var_map[n] = g  # differentiate them (gradients of gradients)
    return grads


def _ancestors(block) -> list:
    """The blocks enclosing `block`, outermost first: a branch's forward reads their values."""
    chain, b = [], block.parent_block
    while b is not None:
        chain.append(b)
        b = b.parent_block
    return chain[::-1]


def _fresh_names(block, into=None):
    """For a backward pass appended after another (fluid.gradients twice, or gradients then
    minimize): the name a variable the pass makes gets, `name` itself unless the block has it
    already, else 'grad/' * k + name, k the pass's number, as fluid 1.8 names them (x@GRAD,
    then grad/grad/x@GRAD, ...), so the passes never write each other's variables and the
    new pass's ops still read the old pass's (a grad op's output, differentiated again)."""
    prefix = None

    def fresh(name: str) -> str:
        nonlocal prefix
        if not block.has_var(name) and (into is None or into._find_var_recursive(name) is None):
            return name
        if prefix is None:  # the passes appended so far
            passes = max([1, *(_grad_prefixes(n) for n in block.vars if GRAD_SUFFIX in n)])
            prefix = "grad/" * (passes + 1)
        return prefix + name

    return fresh


def _grad_prefixes(name: str) -> int:
    count = 0
    while name.startswith("grad/", 5 * count):
        count += 1
    return count


def _append_error_clips(block, op, grad_of: dict):
    """fluid's error_clip_callback: right after the op that writes the gradient of a forward
    variable carrying `error_clip` (fluid.clip.ErrorClipByValue), clip that gradient in place,
    so the ops before it in the backward pass see the clipped error."""
    for name in op.output_arg_names:
        fwd = grad_of.get(name)
        if fwd is None or name != grad_var_name(fwd):
            continue  # a partial gradient (@RENAME@): fluid clips only their sum
        clip = getattr(block._find_var_recursive(fwd), "error_clip", None)
        if clip is not None:
            clip._append_clip_op(block, name)


def _check_type(value, arg: str, types, where: str) -> None:
    """fluid 1.8.5's check_type: a wrong type is a TypeError (ArgumentTypeError)."""
    if not isinstance(value, types):
        names = [t.__name__ for t in (types if isinstance(types, tuple) else (types,))]
        raise ArgumentTypeError(
            f"{where}: {arg} must be {' or '.join(names)}, got {type(value).__name__}")


def _no_grad_set_names(no_grad_set) -> set:
    """fluid's _get_no_grad_set_name: a set, list or tuple of Variables or names (else a
    TypeError)."""
    if no_grad_set is None:
        return set()
    if not isinstance(no_grad_set, (set, list, tuple)):
        raise ArgumentTypeError(f"no_grad_set must be a set, list or tuple, got "
                                f"{type(no_grad_set).__name__}")
    for v in no_grad_set:
        if not isinstance(v, (Variable, str)):
            raise ArgumentTypeError(f"the members of no_grad_set must be Variables or str, "
                                    f"got {type(v).__name__}")
    return {v.name if isinstance(v, Variable) else v for v in no_grad_set}


def _no_grad_names(block, no_grad_set) -> set:
    names = {v.name if isinstance(v, Variable) else v for v in (no_grad_set or ())}
    return names | {n for n, v in block.vars.items() if v.stop_gradient}


_warned_callbacks: set[str] = set()


def _warn_unrun_callbacks(callbacks) -> None:
    """fluid calls each backward callback after every gradient op it appends; spmd applies
    error clips itself (what fluid's own error_clip_callback is for) and runs no other
    callback: say so once per callback, rather than ignore it silently."""
    for callback in callbacks or ():
        name = getattr(callback, "__name__", repr(callback))
        if name == "error_clip_callback" or name in _warned_callbacks:
            continue
        _warned_callbacks.add(name)
        warnings.warn(
            f"append_backward: spmd does not call backward callbacks; {name} is not run (error "
            f"clips, fluid's error_clip_callback, are applied without it)", stacklevel=3)


def append_backward(loss: Variable, parameter_list=None, no_grad_set=None, callbacks=None):
    """Append the backward pass of `loss` to its program; return [(param, grad_var)].

    >>> # params_grads = append_backward(avg_loss)
    """
    where = "fluid.backward.append_backward"
    _check_type(loss, "loss", Variable, where)
    if callbacks is not None:
        _check_type(callbacks, "callbacks", list, where)
    if parameter_list is not None:
        _check_type(parameter_list, "parameter_list", (list, tuple, set), where)
        for i, p in enumerate(parameter_list):
            _check_type(p, f"parameter_list[{i}]", (Variable, str), where)
    _no_grad_set_names(no_grad_set)
    block = loss.block
    if not any(loss.name in op.output_arg_names for op in block.ops):
        raise InvalidArgumentError(f"loss '{loss.name}' is not produced by any op of its program")
    _warn_unrun_callbacks(callbacks)
    # fluid 1.8: called inside a branch (minimize in a layers.cond / case function), the
    # backward runs only when the branch does: its ops go into the branch's block, after the
    # branch's own ops, and the optimizer's follow them (Optimizer targets the current block)
    into = block.program.current_block()
    into = None if into.idx == 0 else into
    params_block = block.program.global_block() if into is not None else block
    if parameter_list is not None:
        names = [p.name if isinstance(p, Variable) else p for p in parameter_list]
        params = [block._var_recursive(n) for n in names]
    else:
        params = [p for p in params_block.all_parameters() if p.trainable]
    listed = {p.name for p in params}
    # fluid: a parameter in no_grad_set, frozen (stop_gradient) or not listed gets no gradient
    no_grad = set().union(*(_no_grad_names(b, no_grad_set) for b in {block, params_block}))
    no_grad |= {p.name for p in params_block.all_parameters() if p.name not in listed}
    seed = ("fill_constant", {}, {"shape": list(loss.shape) or [1], "value": 1.0,
                                  "dtype": loss.dtype})
    sources = (listed | _fed_leaves(block, loss)) - no_grad
    grads = _backward(block, [loss], {loss.name: seed}, sources, no_grad,
                      seed_role=OpRole.LOSS, into=into)
    return [(p, (into or block)._var_recursive(grads[p.name])) for p in params
            if p.name in grads]


_FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def _fed_leaves(block, loss) -> set[str]:
    """Variables a user opened to gradients: fed ones (`x.stop_gradient = False` on a data
    var; adversarial examples, saliency) and any other float one not stop_gradient
    (`a = fill_constant(...)`, `a = 2.0 * i`): fluid 1.8.5 gives every variable on the loss's
    path that is not stop_gradient an `a@GRAD`, which programs fetch (its test_cond does).
    A written one counts only where a gradient can reach it: through float outputs from the
    loss back (ids made by `cast(abs(x) * 5, "int64")` get none, so neither does abs(x))."""
    written = {n for op in block.ops for n in op.output_arg_names}
    reached = _float_path_to(block, loss.name)
    return {n for n, v in block.vars.items()
            if not v.stop_gradient and not v.persistable and v.dtype in _FLOAT_DTYPES
            and not isinstance(v, Parameter) and (n not in written or n in reached)}


def _float_path_to(block, target: str) -> set[str]:
    """The variables from which `target` is reached through the block's ops by way of float
    values only (the ones a gradient flows back to)."""
    def is_float(name):
        var = block.vars.get(name)
        return var is not None and var.dtype in _FLOAT_DTYPES

    reached = {target}
    for op in reversed(block.ops):
        if any(n in reached and is_float(n) for n in op.output_arg_names):
            reached.update(n for n in op.input_arg_names if is_float(n))
    return reached


def _shapes_agree(a, b) -> bool:
    """Same rank, and equal wherever both dimensions are known (-1: decided at run time)."""
    return len(a) == len(b) and all(x == y or x < 0 or y < 0 for x, y in zip(a, b))


def gradients(targets, inputs, target_gradients=None, no_grad_set=None):
    """Gradients of sum(targets) (weighted by target_gradients) w.r.t. inputs; None where an
    input does not reach any target."""
    where = "fluid.backward.gradients"
    _check_type(targets, "targets", (Variable, list, tuple), where)
    _check_type(inputs, "inputs", (Variable, list, tuple), where)
    _check_type(target_gradients, "target_gradients", (Variable, list, tuple, type(None)),
                where)
    for what, value in (("targets", targets), ("inputs", inputs)):
        for i, v in enumerate(value if isinstance(value, (list, tuple)) else [value]):
            _check_type(v, f"{what}[{i}]", Variable, where)
    _no_grad_set_names(no_grad_set)
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inputs_list = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    block = targets[0].block
    tg = target_gradients
    if tg is None:
        tg = [None] * len(targets)
    elif not isinstance(tg, (list, tuple)):
        tg = [tg]
    if len(tg) != len(targets):
        raise InvalidArgumentError(
            f"gradients: {len(targets)} targets but {len(tg)} target_gradients"
        )
    seeds, seed_names = {}, {}
    for t, g in zip(targets, tg):
        if g is None:
            seeds[t.name] = ("fill_any_like", {"X": [t.name]}, {"value": 1.0})
        else:  # as fluid's: the given variable is the target's gradient, read where it is
            # (it may be named t@GRAD itself: gradient_checker's double_grad_check names it so)
            if not _shapes_agree(t.shape, g.shape):
                raise InvalidArgumentError(
                    f"gradients: target '{t.name}' has shape {list(t.shape)} but its "
                    f"target_gradient '{g.name}' has shape {list(g.shape)}; give a gradient "
                    f"of the target's shape (fluid 1.8 refuses one of another shape too)")
            seed_names[t.name] = g.name
    in_names = {v.name for v in inputs_list}
    no_grad = _no_grad_names(block, no_grad_set) - in_names
    grads = _backward(block, targets, seeds, in_names, no_grad, seed_names)
    return [block.vars[grads[v.name]] if v.name in grads else None for v in inputs_list]
