"""The dependency direction DESIGN.md fixes, checked by scanning imports; and `import spmd`
stays free of cupy and MPI."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# package -> spmd packages it must never import. DESIGN.md: core <- ops <- kernels,
# core <- autodiff <- optimizer <- layers, core <- passes <- executor; comm imports no IR
# and not spmd.run (the status file it shares with the launcher is spmd.status_file).
FORBIDDEN = {
    "core": {"ops", "kernels", "autodiff", "optimizer", "layers", "passes", "executor", "comm",
             "ps", "io"},
    "ops": {"kernels", "autodiff", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "kernels": {"autodiff", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "autodiff": {"kernels", "optimizer", "layers", "passes", "executor", "comm", "ps"},
    "optimizer": {"kernels", "layers", "passes", "executor", "comm", "ps"},
    "passes": {"kernels", "layers", "executor", "comm", "ps"},
    "comm": {"core", "ops", "kernels", "autodiff", "optimizer", "layers", "passes", "executor",
             "ps", "io", "run"},
}


def _spmd_imports(path: pathlib.Path, package: str):
    """Top-level spmd subpackages imported by `path` (absolute or relative imports)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(ROOT / "spmd").parts) - 1  # dirs below spmd/
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level > depth:  # reaches spmd/ itself: `from .. import x` / `from ..x`
                    target = (node.module or "").split(".")[0]
                    names = [target] if target else [a.name for a in node.names]
                    yield from names
                continue
            parts = (node.module or "").split(".")
            if parts[0] == "spmd" and len(parts) > 1:
                yield parts[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "spmd" and len(parts) > 1:
                    yield parts[1]


def test_dependency_direction():
    bad = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / "spmd" / package).rglob("*.py")):
            for target in _spmd_imports(path, package):
                if target in forbidden:
                    bad.append(f"{path.relative_to(ROOT)} imports spmd.{target}")
    assert not bad, "imports against DESIGN.md's dependency direction:\n" + "\n".join(bad)


def test_launch_imports_only_run_flags_and_status_file():
    bad = []
    for path in sorted((ROOT / "launch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for m in mods:
                allowed = ("spmd.run", "spmd.flags", "spmd.status_file")
                if m.split(".")[0] == "spmd" and m not in allowed:
                    bad.append(f"{path.relative_to(ROOT)} imports {m}")
    assert not bad, "\n".join(bad)


def test_import_spmd_loads_neither_cupy_nor_mpi():
    code = ("import sys, spmd, spmd.fluid, spmd.static; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'mpi4py')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
