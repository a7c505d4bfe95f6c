"""Names of a fluid 1.8 module that spmd does not provide (yet): asking for one is an
AttributeError that says so and points to docs/fluid_coverage.md, which gives the reason for
each, instead of Python's bare "has no attribute". In a package, any other name that is one
of its submodules is imported at first use."""
from __future__ import annotations

import importlib
import pkgutil

__all__ = ["missing_names"]


def missing_names(namespace: dict, names) -> None:
    """Install a module __getattr__ in `namespace` (a module's globals) for `names`."""
    where = namespace["__name__"].replace("spmd.fluid", "fluid", 1)
    missing = frozenset(names)
    path = namespace.get("__path__")

    def __getattr__(name: str):  # noqa: N807 - PEP 562
        if name in missing:
            raise AttributeError(
                f"{where}.{name} is in fluid 1.8 but not in spmd: docs/fluid_coverage.md "
                f"gives the reason for each name spmd does not provide")
        if path is not None and not name.startswith("__") and name in {
                m.name for m in pkgutil.iter_modules(path)}:
            return importlib.import_module(f"{namespace['__name__']}.{name}")
        raise AttributeError(f"module {where!r} has no attribute {name!r}")

    namespace["__getattr__"] = __getattr__
