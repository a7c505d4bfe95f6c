"""Checkpoints are atomic: a save killed (SIGKILL) at every move it makes leaves the previous
checkpoint or the new one, complete, and a load never sees a mix; malformed files are errors
naming the file and the variable, found before anything is allocated."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

SCRIPT = pathlib.Path(__file__).resolve().parent / "scripts" / "save_checkpoint.py"
sys.path.insert(0, str(SCRIPT.parent))
from save_checkpoint import SHAPES, program  # noqa: E402

WAYS = ("per_file", "one_file", "paddle2")


def _save(directory, value: float, how: str, kill_at: int | None = None) -> int:
    env = dict(os.environ)
    env.pop("SPMD_TEST_FAIL_AT_FS_STEP", None)
    if kill_at is not None:
        env["SPMD_TEST_KILL_AT_FS_STEP"] = str(kill_at)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(directory), str(value), how],
                          env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, -9):
        raise AssertionError(proc.stderr[-2000:])
    return proc.returncode


def _load(directory, how: str) -> dict:
    prog = program()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        if how == "per_file":
            fluid.io.load_persistables(exe, str(directory), prog)
        elif how == "one_file":
            fluid.io.load_persistables(exe, str(directory), prog, filename="all")
        else:
            fluid.load(prog, str(directory / "m"), exe)
    return {name: np.array(scope.get(name)) for name in SHAPES}


@pytest.mark.parametrize("how", WAYS)
def test_a_save_killed_at_any_move_leaves_the_old_or_the_new_checkpoint(tmp_path, how):
    outcomes = {"old": 0, "new": 0}
    for kill_at in range(1, 40):
        directory = tmp_path / f"k{kill_at}"
        assert _save(directory, 1.0, how) == 0
        code = _save(directory, 2.0, how, kill_at=kill_at)
        values = _load(directory, how)
        firsts = {float(v.flat[0]) for v in values.values()}
        assert len(firsts) == 1 and all((v == v.flat[0]).all() for v in values.values()), \
            f"killed at move {kill_at}: a mix of checkpoints {values}"
        outcomes["old" if firsts == {1.0} else "new"] += 1
        if code == 0:  # the save made fewer moves than kill_at: swept them all
            break
    else:
        raise AssertionError("the save never finished within 39 moves")
    assert outcomes["old"] >= 1 and outcomes["new"] >= 2, outcomes
    leftovers = [n for n in os.listdir(directory) if n.endswith(".tmp") or "journal" in n]
    assert not leftovers, leftovers


@pytest.fixture
def saved(tmp_path):
    assert _save(tmp_path, 3.0, "per_file") == 0
    return tmp_path


def _expect_load_error(directory, pattern: str):
    with pytest.raises(InvalidArgumentError, match=pattern):
        _load(directory, "per_file")


def test_random_bytes_are_named_not_called_a_pickle(saved):
    (saved / "b.npy").write_bytes(np.random.default_rng(0).bytes(200))
    _expect_load_error(saved, r"variable 'b' from '.*b\.npy': it is not a \.npy file")


def test_a_truncated_file_is_named(saved):
    data = (saved / "a.npy").read_bytes()
    (saved / "a.npy").write_bytes(data[:-8])
    _expect_load_error(saved, r"variable 'a' from '.*a\.npy': the file is truncated")


def test_a_header_announcing_a_huge_shape_fails_before_allocating(saved):
    data = (saved / "c.npy").read_bytes()
    preamble, header_len = data[:10], int.from_bytes(data[8:10], "little")  # .npy version 1.0
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999), }"
    header = text.ljust(header_len - 1) + b"\n"  # the same length: the data follows unmoved
    (saved / "c.npy").write_bytes(preamble + header + data[10 + header_len:])
    _expect_load_error(saved, r"variable 'c' from '.*c\.npy': the file is truncated: its "
                              r"header announces shape \[99999999999, 99999\]")


def test_a_file_changed_outside_spmd_io_disagrees_with_the_manifest(saved):
    np.save(saved / "d.npy", np.zeros(6, "float32"))
    _expect_load_error(saved, r"variable 'd'.*does not match the directory's manifest")


def test_a_missing_file_is_named(saved):
    os.remove(saved / "b.npy")
    with pytest.raises(Exception, match=r"'b'.*b\.npy.*does not exist"):
        _load(saved, "per_file")
