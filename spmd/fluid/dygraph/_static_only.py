"""The one error of fluid.dygraph in spmd: spmd runs static programs, so entering dygraph
mode (guard, enable_dygraph, to_variable, building a dygraph Layer, DataParallel...) raises
it, naming the static way to write the same thing."""
from __future__ import annotations

from ...errors import PreconditionError

_HOW = ("spmd runs static programs: build the model with fluid.layers inside "
        "`with fluid.program_guard(main, startup):`, call optimizer.minimize(loss), and run it "
        "with exe.run(...) (data parallel: fluid.CompiledProgram(main).with_data_parallel("
        "loss_name=loss.name) under mpirun)")


def static_only(what: str, instead: str | None = None) -> PreconditionError:
    """The error for dygraph feature `what`, with its static equivalent `instead`."""
    hint = f"; the static equivalent of {what} is {instead}" if instead else ""
    return PreconditionError(f"{what} needs fluid's dygraph (imperative) mode, which spmd "
                             f"does not have. {_HOW}{hint}")


def refusing_class(name: str, instead: str, base=object, what: str | None = None):
    """A class named `name` whose construction raises static_only(...)."""

    def __init__(self, *args, **kwargs):
        raise static_only(what or f"fluid.dygraph.{name}", instead)

    doc = (f"fluid.dygraph.{name}: importable; constructing it raises, naming the static "
           f"equivalent ({instead}).")
    return type(name, (base,), {"__init__": __init__, "__doc__": doc})
