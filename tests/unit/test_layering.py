"""The import order of comm, the guard and the profiler, and no import cycle among spmd's and
launch's modules, read from the source (every import, those inside functions too; not those
under `if TYPE_CHECKING:`, which never run).

comm, guard, profiler (docs/design.md): comm imports neither the guard nor the profiler; they
may import comm; spmd/events.py, below all three, is how comm tells the guard of collectives
and reads whether the profiler records. test_imports.py keeps the IR layers' direction.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


# package (or module) -> what it must never import, directly or inside a function
ONE_WAY = {
    "spmd.events": ("spmd.comm", "spmd.guard", "spmd.profiler", "spmd.profiler_report",
                    "spmd.timeline"),
    "spmd.comm": ("spmd.guard", "spmd.profiler", "spmd.profiler_report", "spmd.timeline"),
    "spmd.guard": ("spmd.profiler", "spmd.profiler_report", "spmd.timeline"),
    "spmd.profiler": ("spmd.guard",),
    "spmd.profiler_report": ("spmd.guard",),
    "spmd.timeline": ("spmd.guard",),
}


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    found = {}
    for top in ("spmd", "launch"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges = {}
    for name, (path, package) in modules.items():
        here = name if package else name.rpartition(".")[0]
        targets = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for alias in node.names:
                    target = resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in \
                        modules else resolve(base)
                    if target:
                        targets.add(target)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = resolve(alias.name)
                    if target:
                        targets.add(target)
        targets.discard(name)
        edges[name] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_comm_guard_and_profiler_import_one_way():
    edges = _graph()
    bad = [f"{source} imports {target}"
           for source, targets in sorted(edges.items()) for target in sorted(targets)
           for package, forbidden in ONE_WAY.items() if _within(source, package)
           for f in forbidden if _within(target, f)]
    assert not bad, "against the order events <- comm <- guard, profiler:\n" + "\n".join(bad)


def test_no_import_cycle_among_comm_guard_and_profiler():
    edges = _graph()
    scope = ("spmd.comm", "spmd.guard", "spmd.profiler", "spmd.profiler_report",
             "spmd.timeline", "spmd.events", "spmd.flags", "spmd.errors", "spmd.launcher_vars",
             "spmd.job_token", "spmd.status_file")
    inside = {m: {t for t in ts if any(_within(t, s) for s in scope)}
              for m, ts in edges.items() if any(_within(m, s) for s in scope)}
    assert _cycles(inside) == []


def test_no_import_cycle_in_spmd_or_launch():
    """Not one cycle in the import graph of spmd/ and launch/ (imports inside functions count:
    a lazy import does not break a cycle, a lower module does)."""
    cycles = [sorted(c) for c in _cycles(_graph())]
    assert not cycles, "import cycles (break each: a lower module, or the import moved):\n" + \
        "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_profiler_is_asked_through_its_public_state_only():
    """Whether the profiler records is read as events.profiling.recorder (or
    profiler.active()), never as the profiler module's private `_active`."""
    readers = [str(path.relative_to(ROOT)) for path, _ in _modules().values()
               if path.name != "profiler.py" and "._active" in path.read_text()
               and "profiler" in path.read_text()]
    assert not readers, readers
