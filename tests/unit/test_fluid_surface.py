"""docs/fluid_coverage.md is what tests/compat/fluid_coverage.py makes from fluid 1.8.5's stored
surface and spmd.fluid today, and it regenerates byte-identical."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "compat"))
import fluid_coverage  # noqa: E402


def test_coverage_doc_is_current():
    assert fluid_coverage.main(["--check"]) == 0, (
        "run: python tests/compat/fluid_coverage.py --write")


def test_regeneration_is_byte_identical():
    data = fluid_coverage.surface()
    assert fluid_coverage.render(data) == fluid_coverage.render(data)


def test_a_name_of_the_wrong_kind_is_not_counted_as_working():
    import types

    module = types.ModuleType("m")
    module.f = 3  # fluid has a function there
    assert fluid_coverage.check_name(module, "m", "f", "function")[0] == "wrong kind"
    assert fluid_coverage.check_name(module, "m", "g", "class") == ("missing", "")
    module.C = type("C", (), {})
    assert fluid_coverage.check_name(module, "m", "C", "class") == ("working", "")


def test_every_module_imports_and_every_gap_has_a_reason():
    data = fluid_coverage.surface()
    rows = fluid_coverage.module_rows(data)
    broken = [r["module"] for r in rows if not r["group"] and r["import_error"]]
    assert not broken, f"do not import as spmd.fluid.<path>: {broken}"
    rows += fluid_coverage.member_rows(data)
    unexplained = [(r.get("path", r.get("owner")), n) for r in rows for n, st, _ in r["names"]
                   if st not in ("working", "out", "later", "not planned")]
    assert not unexplained, f"neither working nor given a reason: {unexplained}"
