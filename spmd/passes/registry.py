"""The pass registry: each pass registers itself, in its own module, with the BuildStrategy
fields it serves, its order and the condition it runs under; the data-parallel rewrite
(data_parallel.py) only runs, in order, the passes whose condition holds.

Adding a pass touches its own module (and the strategy field, if it is a new one), then
regenerates the pass index (`python -c "from spmd.lazy import write_indexes; write_indexes()"`):
every module of this package is imported on the first lookup of a pass or of the list, but
`run` imports only the modules of the passes whose gate holds (pass_index.py, made by
pass_gates.py), so a data-parallel compile loads the passes it runs, not all of them.

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
from typing import TYPE_CHECKING, NamedTuple

from ..errors import InvalidArgumentError
from ..record import FrozenRecord

if TYPE_CHECKING:
    from .common import PassContext  # what a pass is given (common.py registers a pass)

__all__ = ["PASSES", "Pass", "PassEntry", "PassRegistry", "get_pass", "register_pass"]


class Pass(FrozenRecord, frozen=True):
    """One registered rewrite: `apply(ctx)` changes ctx.program in place when `when(ctx)`."""

    __slots__ = ("name", "apply", "order", "fields", "when", "one_place")
    _fields = __slots__

    name: str
    apply: Callable[[PassContext], None]
    order: int
    fields: tuple[str, ...]  # the BuildStrategy fields it serves (documentation and checks)
    when: Callable[[PassContext], bool]
    # it also runs on a program compiled for one place (CompiledProgram(program, strategy)
    # without with_data_parallel), as fluid runs its build strategy's passes there too
    one_place: bool

    def __init__(self, name: str, apply: Callable[[PassContext], None], order: int,
                 fields: tuple[str, ...], when: Callable[[PassContext], bool],
                 one_place: bool = False):
        set_ = object.__setattr__  # frozen: see spmd/record.py
        set_(self, "name", name)
        set_(self, "apply", apply)
        set_(self, "order", order)
        set_(self, "fields", fields)
        set_(self, "when", when)
        set_(self, "one_place", one_place)


class PassEntry(NamedTuple):
    """A pass as the generated index knows it before its module is imported."""

    module: str  # the module whose import registers it
    order: int
    one_place: bool
    # a necessary part of its condition, readable without `module` (pass_gates.py); None:
    # the module is imported to read the condition
    gate: Callable[[PassContext], bool] | None


class PassRegistry:
    """Passes by name. `discover` names a package whose modules are all imported on the first
    lookup, so that every pass in it has registered itself; `index` names a generated module
    whose PASSES (name -> PassEntry) lets `run` import only the passes whose gate holds.

    >>> PassRegistry().passes()
    []
    """

    def __init__(self, discover: str | None = None, index: str | None = None):
        self._passes: dict[str, Pass] = {}
        self._discover = discover
        self._index_module = index

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
        found = self._passes.get(name) or self._import_indexed(name)
        if found is None:
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
        before its pass would run, so it sees what the earlier passes did. A pass not yet
        imported is imported only when its indexed gate holds then (a gate false means its
        condition is false)."""
        index = self._index()
        names = set(self._passes) | set(index)
        applied = []
        for name in sorted(names, key=lambda n: (self._order(n, index), n)):
            p = self._passes.get(name)
            if p is None:
                entry = index[name]
                if (one_place and not entry.one_place) or (entry.gate is not None
                                                           and not entry.gate(ctx)):
                    continue
                p = self._import_indexed(name)
                if p is None:
                    raise InvalidArgumentError(
                        f"importing {entry.module} registered no pass '{name}', which the pass "
                        f"index names; regenerate it: python -c \"from spmd.lazy import "
                        f"write_indexes; write_indexes()\"")
            if (p.one_place or not one_place) and p.when(ctx):
                p.apply(ctx)
                applied.append(p.name)
        return applied

    def imported(self) -> list[str]:
        """The names of the passes whose modules are imported so far (loads nothing)."""
        return sorted(self._passes)

    def _order(self, name: str, index: dict) -> int:
        p = self._passes.get(name)
        return p.order if p is not None else index[name].order

    def _index(self) -> dict[str, PassEntry]:
        """The index of the passes not imported yet ({} once every module is imported)."""
        if self._discover is None:
            return {}
        if self._index_module is None:  # no index: every module of the package, as before
            self._load()
            return {}
        try:
            return importlib.import_module(self._index_module).PASSES
        except ModuleNotFoundError as e:  # no index yet (while it is generated): load all
            if e.name != self._index_module:
                raise
            self._index_module = None
            self._load()
            return {}

    def _import_indexed(self, name: str) -> Pass | None:
        """Import the module the index names for `name`; the pass it registered, or None."""
        if self._discover is None:
            return self._passes.get(name)
        entry = self._index().get(name)
        if entry is not None:
            importlib.import_module(entry.module)
        return self._passes.get(name)

    def _load(self):
        if self._discover is None:
            return
        package, self._discover = self._discover, None
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")


def _qualname(fn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


PASSES = PassRegistry(discover=__package__, index=f"{__package__}.pass_index")
register_pass = PASSES.register
get_pass = PASSES.get
