"""The corpus (examples/corpus) and the book examples (examples/book): each fluid 1.x-style
program runs on 1 process and, through paddle-launch, on 2 ranks, and both runs end with the
same parameters. Where a program's output does not depend on random initialization (the
learning-rate sequences), it equals what real fluid 1.8.5 printed for the same program.

The whole corpus, with its table in docs/fluid_programs.md: python examples/corpus/run_corpus.py
--write-doc
"""
from __future__ import annotations

import pathlib
import sys

import pytest
from oracle_io import load

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "corpus"))
import run_corpus  # noqa: E402

BOOK = run_corpus.programs(ROOT / "examples" / "book")
CORPUS = run_corpus.programs()


def _check(path):
    outcome = run_corpus.check(path, timeout=280)
    assert outcome.ok, f"{outcome.name}: {outcome.detail}"
    return outcome


@pytest.mark.parametrize("path", BOOK, ids=lambda p: p.stem)
def test_book_example_one_process_equals_two_ranks(path):
    _check(path)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_program_one_process_equals_two_ranks(path):
    outcome = _check(path)
    if path.stem == "lr_schedules":
        want = load("corpus")["lr_schedules"]
        got = [line for line in outcome.output.splitlines() if " lr: " in line]
        assert [g for g in got if not g.startswith("paddle2")] == want
        assert any(g.startswith("paddle2_step_decay") for g in got)


def test_corpus_has_at_least_ten_programs():
    assert len(CORPUS) >= 10, [p.stem for p in CORPUS]
