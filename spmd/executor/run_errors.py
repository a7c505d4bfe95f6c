"""The errors a plan's run raises for what went wrong inside it: an op that failed, named with
its inputs' shapes, and a value read before anything gave it one.
"""
from __future__ import annotations

from ..core.variable import Parameter, Variable
from ..errors import ExecutionError, FeedError, PreconditionError


def op_failed(tag: str, e: Exception, where, env: dict) -> ExecutionError:
    """`e`, raised by op `where` ((program index, op)), as an error naming the op, the shapes
    of its inputs in `env` and, for an input that holds None, how to give it a value."""
    i, op = where
    shapes = {n: tuple(env[n].shape) for n in op.input_arg_names
              if n in env and hasattr(env[n], "shape")}
    unset = [n for n in dict.fromkeys(op.input_arg_names) if n in env and env[n] is None]
    hint = "".join(
        f"\n  '{n}' holds no value: no op wrote it before this one (a While loop that ran "
        f"zero times, or a conditional block that did not run, leaves a variable only it "
        f"writes without one); give it a value before, e.g. "
        f"fluid.layers.fill_constant(shape, dtype, value, out={n})" for n in unset)
    return ExecutionError(
        f"{tag}op #{i} '{op.type}' failed: {type(e).__name__}: {e}{hint}\n"
        f"  op: {op}\n  input shapes: {shapes}"
    )


def uninitialized(var: Variable) -> PreconditionError | FeedError:
    """The error for `var` read from a scope that lacks it: a parameter or persistable not
    initialized, or a value neither fed nor set."""
    if var.persistable:
        kind = "parameter" if isinstance(var, Parameter) else "persistable variable"
        return PreconditionError(
            f"{kind} '{var.name}' has no value in the scope: run the startup program "
            f"(exe.run(fluid.default_startup_program())) or load it before running this program"
        )
    return FeedError(
        f"variable '{var.name}' is read before any op writes it and was neither fed nor set in "
        f"the scope; feed it (feed={{'{var.name}': array}})"
    )
