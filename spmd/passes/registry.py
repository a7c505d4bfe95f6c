"""The pass registry: each pass registers itself, in its own module, with the BuildStrategy
fields it serves, its order and the condition it runs under; the data-parallel rewrite
(data_parallel.py) only runs, in order, the passes whose condition holds.

Adding a pass touches its own module (and the strategy field, if it is a new one): every
module of this package is imported on the first lookup, so no list of passes is kept elsewhere.

Orders in use: 10 seed the loss gradient, 20 rewrite ops, 30 aggregate gradients, 90 finish the
collectives, 100 debug output of the finished program.

>>> registry = PassRegistry()
>>> @registry.register("noop", order=50, when=lambda ctx: True)
... def noop(ctx):
...     pass
>>> [p.name for p in registry.passes()]
['noop']
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from .common import PassContext  # what a pass is given (common.py registers a pass)

__all__ = ["PASSES", "Pass", "PassRegistry", "get_pass", "register_pass"]


@dataclass(frozen=True)
class Pass:
    """One registered rewrite: `apply(ctx)` changes ctx.program in place when `when(ctx)`."""

    name: str
    apply: Callable[[PassContext], None]
    order: int
    fields: tuple[str, ...]  # the BuildStrategy fields it serves (documentation and checks)
    when: Callable[[PassContext], bool]
    # it also runs on a program compiled for one place (CompiledProgram(program, strategy)
    # without with_data_parallel), as fluid runs its build strategy's passes there too
    one_place: bool = False


class PassRegistry:
    """Passes by name. `discover` names a package whose modules are all imported on the first
    lookup, so that every pass in it has registered itself.

    >>> PassRegistry().passes()
    []
    """

    def __init__(self, discover: str | None = None):
        self._passes: dict[str, Pass] = {}
        self._discover = discover

    def register(self, name: str, *, order: int, when: Callable[[PassContext], bool],
                 fields: tuple[str, ...] = (), one_place: bool = False):
        """Decorator: register `fn(ctx)` as pass `name`, run in `order` (lower first, ties by
        name) whenever `when(ctx)` holds; `fields` are the BuildStrategy fields it serves;
        `one_place`: it runs on one-place programs too (Pass.one_place)."""
        if isinstance(fields, str):
            fields = (fields,)

        def decorator(fn):
            old = self._passes.get(name)
            # the same function registered again (a module reloaded) replaces itself; another
            # function under a taken name is a mistake that would silently drop a pass
            if old is not None and _qualname(old.apply) != _qualname(fn):
                raise InvalidArgumentError(
                    f"pass '{name}' is registered twice ({_qualname(old.apply)} and "
                    f"{_qualname(fn)}); give the new pass a name of its own")
            self._passes[name] = Pass(name, fn, order, tuple(fields), when, one_place)
            return fn

        return decorator

    def get(self, name: str) -> Pass:
        """The pass registered as `name`; an unknown name is an error listing what exists."""
        self._load()
        found = self._passes.get(name)
        if found is None:
            raise InvalidArgumentError(
                f"no pass named '{name}'; registered passes: {sorted(self._passes)}")
        return found

    def passes(self) -> list[Pass]:
        """Every registered pass, in the order they run."""
        self._load()
        return sorted(self._passes.values(), key=lambda p: (p.order, p.name))

    def fields_served(self) -> dict[str, list[str]]:
        """BuildStrategy field -> the names of the passes that serve it."""
        served: dict[str, list[str]] = {}
        for p in self.passes():
            for f in p.fields:
                served.setdefault(f, []).append(p.name)
        return served

    def run(self, ctx: PassContext, one_place: bool = False) -> list[str]:
        """Apply, in order, each pass whose condition holds (with `one_place`, only those
        registered for one-place programs); return their names. A condition is read just
        before its pass would run, so it sees what the earlier passes did."""
        applied = []
        for p in self.passes():
            if (p.one_place or not one_place) and p.when(ctx):
                p.apply(ctx)
                applied.append(p.name)
        return applied

    def _load(self):
        if self._discover is None:
            return
        package, self._discover = self._discover, None
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")


def _qualname(fn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


PASSES = PassRegistry(discover=__package__)  # the passes of spmd.passes
register_pass = PASSES.register
get_pass = PASSES.get
