"""Gradients of the ops that run a sub-block: while, conditional_block, recurrent.

Each gets a gradient block, a sub-block of its body holding
  1. the body's ops again, every output renamed once (SSA), so that a value the body
     overwrites (a loop's state) is still there, in its own name, for the gradient ops;
  2. the gradient ops of that copy (the same reverse walk as the whole program's).
The gradient op runs it once per iteration (per time step, or once for a branch that ran), in
reverse, on the values the iteration began with (the forward op keeps them: it binds its
StepScopes output only once a backward pass needs it) and on the gradients of what the
iteration wrote (`seeds`); the block leaves the gradients of what the iteration read in the
`results` names. Recomputing the iteration costs a second forward pass of the body but keeps
only the loop's state per iteration, never its temporaries; random ops draw the same numbers
again (the generator's state is kept per iteration).

The names a gradient block's caller reads back after running it are declared in the body (the
block's parent): a block frees only its own temporaries.
"""
from __future__ import annotations

from ..core.operator import OpRole
from ..core.unique_name import generate
from ..record import Record
from .backward import (
    SUB_BLOCK_GRAD_MAKERS,
    ReverseWalk,
    _ancestors_needing_grad,
    _discard_name,
)

FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


class GradBlock(Record):
    """A gradient block: its index, `seeds` (body output name -> the name its gradient is
    given under) and `results` (body input name -> the name its gradient is left under)."""

    __slots__ = ("idx", "seeds", "results")
    _fields = __slots__

    def __init__(self, idx: int, seeds: dict, results: dict):
        self.idx, self.seeds, self.results = idx, seeds, results


def _float(var) -> bool:
    return var.dtype in FLOAT_DTYPES


def _copy_body(body, grad_block, inputs: list, seeded: list):
    """The body's ops appended to `grad_block` with every output renamed: returns the names
    of the seeded outputs' final values."""
    current: dict[str, str] = {}
    count = 0

    def fresh(name: str) -> str:
        nonlocal count
        var = body._var_recursive(name)
        new = f"{name}@RC{grad_block.idx}.{count}"
        count += 1
        grad_block.create_var(name=new, shape=var.shape, dtype=var.dtype, type=var.type,
                              stop_gradient=var.stop_gradient)
        return new

    def ren(slots: dict) -> dict:
        return {s: [current.get(n, n) for n in names] for s, names in slots.items()}

    for op in body.ops:
        type_, attrs = op.type, dict(op.attrs)
        if type_ == "print":  # printed once, in the forward pass
            if not op.output("Out"):
                continue
            type_, attrs = "assign", {}
        ins = ren({"X": op.input("In")} if op.type == "print" else op.inputs)
        outs = {}
        for slot, names in op.outputs.items():
            outs[slot] = []
            for n in names:
                current[n] = fresh(n)
                outs[slot].append(current[n])
        grad_block.append_op(type_, ins, outs, attrs, role=OpRole.BACKWARD)
    finals = []
    for name in seeded:
        if name not in current:  # not written by the body: the value read is the value left
            current[name] = fresh(name)
            grad_block.append_op("assign", {"X": [name]}, {"Out": [current[name]]}, {},
                                 role=OpRole.BACKWARD)
        finals.append(current[name])
    return finals


def build_grad_block(body, inputs: list, seeded: list, sources: set, no_grad: set) -> GradBlock:
    """The gradient block of `body` (see the module doc): `inputs` are the names the body reads
    from outside it, `seeded` the names it writes whose gradients flow in, `sources` the
    inputs to differentiate."""
    program = body.program
    current = program._current_block_idx
    grad_block = program._create_block(parent_idx=body.idx)
    program._current_block_idx = current  # a backward pass appends where it was appending
    finals = _copy_body(body, grad_block, inputs, seeded)
    copies = list(grad_block.ops)
    no_grad = set(no_grad) | {n for b in (body, grad_block) for n, v in b.vars.items()
                              if v.stop_gradient}
    needs = _ancestors_needing_grad(copies, set(sources) - no_grad, no_grad)
    in_set = set(inputs)
    results = {n: f"{n}@GRAD@CF{grad_block.idx}" for n in inputs}

    def name_for(key):
        name, _ = key
        return results[name] if name in in_set else f"{name}@GRAD"

    seeds = {n: f"{n}@GRAD@SEED{grad_block.idx}" for n in seeded}
    walk = ReverseWalk(copies, grad_block, needs, no_grad, name_for,
                       {(final, 1): seeds[n] for n, final in zip(seeded, finals)}).run()
    for n in seeded:
        var = body._var_recursive(n)
        grad_block.create_var(name=seeds[n], shape=var.shape, dtype=var.dtype, type=var.type)
    made = {walk.rename.get(g, g): fwd for g, fwd in walk.ctx.grad_of.items()}
    for g, fwd in made.items():
        if grad_block._find_var_recursive(g) is None:
            var = grad_block._var_recursive(fwd)
            # what the caller reads back lives outside the gradient block (see the module doc)
            where = body if g in results.values() else grad_block
            where.create_var(name=g, shape=var.shape, dtype=var.dtype, type=var.type)
    for type_, ins, outs, attrs in walk.specs:
        grad_block.append_op(type_, _renamed(ins, walk.rename), _renamed(outs, walk.rename),
                             attrs, role=OpRole.BACKWARD)
    got = {n: results[n] for n in inputs if walk.finalized.get((n, 0))}
    return GradBlock(grad_block.idx, seeds, got)


def _renamed(slots: dict, rename: dict) -> dict:
    return {s: [rename.get(n, n) for n in names] for s, names in slots.items()}


def _bind_saved(op, slot: str) -> str:
    """The forward op's output that keeps what its gradient needs (bound on first use: until a
    backward pass asks, the op keeps nothing)."""
    names = op.output(slot)
    if names:
        return names[0]
    name = generate(f"{op.type}.{slot.lower()}")
    op.block.create_var(name=name, type="STEP_SCOPES", stop_gradient=True)
    op.outputs[slot] = [name]
    op.block.program._bump()
    return name


def _needs(ctx, var_of, slot_name: str) -> bool:
    return slot_name in ctx._needs_grad and _float(var_of(slot_name))


def _input_grads(ctx, op, slot_names: list, wanted: list) -> list | None:
    """Gradient names for an input slot (throwaway names where not wanted), or None when no
    element needs one."""
    grads = [ctx.in_grad(n) if w else None for n, w in zip(slot_names, wanted)]
    if not any(grads):
        return None
    return [g or _discard_name(ctx, n, op) for g, n in zip(grads, slot_names)]


def _out_grads(ctx, op, slot: str, names: list) -> dict:
    var = op.block._var_recursive
    return {n: ctx.out_grad(s) for s, n in zip(op.output(slot), names)
            if _needs(ctx, var, s)}


def while_grad_maker(op, ctx):
    program = op.block.program
    var = op.block._var_recursive
    x_slot, x_names = op.input("X"), list(op.attr("x_names"))
    out_slot, out_names = op.output("Out"), list(op.attr("out_names"))
    out_grads = _out_grads(ctx, op, "Out", out_names)
    if not any(out_grads.values()):
        return []
    wanted = [_needs(ctx, var, s) for s in x_slot]
    x_grads = _input_grads(ctx, op, x_slot, wanted)
    if x_grads is None:
        return []
    # every float output that needs a gradient is seeded: a loop carries it to earlier
    # iterations even where none flows in from after the loop
    seeded = [n for s, n in zip(out_slot, out_names) if _needs(ctx, var, s)]
    sources = {n for s, n, w in zip(x_slot, x_names, wanted) if w} | set(seeded)
    body = program.block(op.attr("sub_block"))
    gb = build_grad_block(body, x_names, seeded, sources & set(x_names), ctx.no_grad)
    steps = _bind_saved(op, "StepScopes")
    grad_out_names = [n for n in seeded if out_grads.get(n)]
    return [("while_grad",
             {"X": x_slot, "Out": out_slot,
              "Out@GRAD": [out_grads[n] for n in grad_out_names], "StepScopes": [steps]},
             {"X@GRAD": x_grads},
             {"sub_block": gb.idx, "x_names": x_names, "out_names": out_names,
              "grad_out_names": grad_out_names,
              "seed_names": [gb.seeds.get(n, "") for n in out_names],
              "result_names": [gb.results.get(n, "") for n in x_names]})]


def conditional_block_grad_maker(op, ctx):
    program = op.block.program
    var = op.block._var_recursive
    in_slot, in_names = op.input("Input"), list(op.attr("input_names"))
    out_names = list(op.attr("out_names"))
    out_grads = _out_grads(ctx, op, "Out", out_names)
    if not any(out_grads.values()):
        return []
    wanted = [_needs(ctx, var, s) for s in in_slot]
    in_grads = _input_grads(ctx, op, in_slot, wanted)
    if in_grads is None:
        return []
    seeded = [n for n in out_names if out_grads.get(n)]
    sources = {n for n, w in zip(in_names, wanted) if w}
    body = program.block(op.attr("sub_block"))
    gb = build_grad_block(body, in_names, seeded, sources, ctx.no_grad)
    scope = _bind_saved(op, "Scope")
    return [("conditional_block_grad",
             {"Input": in_slot, "Out@GRAD": [out_grads[n] for n in seeded], "Scope": [scope]},
             {"Input@GRAD": in_grads},
             {"sub_block": gb.idx, "input_names": in_names, "out_names": out_names,
              "grad_out_names": seeded, "seed_names": [gb.seeds.get(n, "") for n in out_names],
              "result_names": [gb.results.get(n, "") for n in in_names]})]


def recurrent_grad_maker(op, ctx):
    program = op.block.program
    var = op.block._var_recursive
    body = program.block(op.attr("sub_block"))
    step_outs = list(op.attr("step_output_names"))
    out_grads = _out_grads(ctx, op, "outputs", step_outs)
    if not any(out_grads.values()):
        return []
    slots = {"inputs": list(op.attr("step_input_names")),
             "initial_states": list(op.attr("ex_states")),
             "parameters": list(op.attr("param_names"))}
    grads, sources = {}, set()
    for slot, inner in slots.items():
        wanted = [_needs(ctx, var, s) for s in op.input(slot)]
        g = _input_grads(ctx, op, op.input(slot), wanted)
        if g is not None:
            grads[slot + "@GRAD"] = g
        sources |= {n for n, w in zip(inner, wanted) if w}
    if not grads:
        return []
    states = [n for n in op.attr("states") if _float(body._var_recursive(n))]
    sources |= {n for n in slots["initial_states"] if _float(body._var_recursive(n))}
    grad_outs = [n for n in step_outs if out_grads.get(n)]
    inner_inputs = [n for names in slots.values() for n in names]
    gb = build_grad_block(body, inner_inputs, grad_outs + states, sources, ctx.no_grad)
    scopes = _bind_saved(op, "step_scopes")
    return [("recurrent_grad",
             {"inputs": op.input("inputs"), "initial_states": op.input("initial_states"),
              "parameters": op.input("parameters"),
              "outputs@GRAD": [out_grads[n] for n in grad_outs], "step_scopes": [scopes]},
             grads,
             {"sub_block": gb.idx, "reverse": op.attr("reverse"),
              **{k: list(op.attr(k)) for k in ("step_input_names", "ex_states", "states",
                                              "param_names", "step_output_names")},
              "grad_output_names": grad_outs,
              "seed_names": [gb.seeds.get(n, "") for n in step_outs + list(op.attr("states"))],
              "result_names": [gb.results.get(n, "") for n in inner_inputs]})]


SUB_BLOCK_GRAD_MAKERS.update({
    "while": while_grad_maker,
    "conditional_block": conditional_block_grad_maker,
    "recurrent": recurrent_grad_maker,
})
