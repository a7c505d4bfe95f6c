"""docs/design.md's layout lists every module of spmd/ and launch/, each with the first sentence
of its docstring (tests/compat/design_layout.py): a module added, moved or removed, or a
docstring whose first sentence changed, fails here until `design_layout.py --write` is run."""
from __future__ import annotations

import sys

from tests.compat import design_layout as layout


def test_every_module_is_listed_once_and_nothing_else():
    listed = layout.listed(layout.DESIGN.read_text())
    on_disk = [p.as_posix() for p in layout.module_paths()]
    missing = sorted(set(on_disk) - set(listed))
    gone = sorted(set(listed) - set(on_disk))
    assert not missing, f"modules missing from docs/design.md's layout: {missing}; run " \
                        f"{sys.executable} tests/compat/design_layout.py --write"
    assert not gone, f"docs/design.md's layout lists modules that are gone: {gone}"
    assert len(listed) == len(set(listed)) == len(on_disk)


def test_each_line_is_its_modules_docstring():
    assert layout.current_section(layout.DESIGN.read_text()) == layout.render(), \
        "docs/design.md's layout is stale: run python tests/compat/design_layout.py --write"


def test_a_line_is_the_first_sentence_cut_at_a_word(tmp_path, monkeypatch):
    module = tmp_path / "pkg" / "long.py"
    module.parent.mkdir()
    module.write_text('"""Owns the thing. More about it.\n\nDetails."""\n')
    monkeypatch.setattr(layout, "ROOT", tmp_path)
    assert layout.summary(module.relative_to(tmp_path)) == "Owns the thing."
    module.write_text('"""' + "word " * 60 + '"""\n')
    line = layout.summary(module.relative_to(tmp_path))
    assert line.endswith("...") and len(line) <= layout.MAX_LINE and "word word" in line
