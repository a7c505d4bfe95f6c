"""Checkpoints are atomic: a save SIGKILLed at every move it makes (SPMD_TEST_KILL_AT_FS_STEP,
spmd/io/files.py) over an older checkpoint leaves the older one or the new one, complete, for
every way of saving; loads and the next save finish or remove what it left; saves into one
directory from several processes, and a load beside a running save, never mix two saves."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.io.files import MANIFEST

SCRIPT = pathlib.Path(__file__).resolve().parent / "scripts" / "save_checkpoint.py"
sys.path.insert(0, str(SCRIPT.parent))
from save_checkpoint import INFERENCE_VARS, SHAPES, WAYS, program, save  # noqa: E402

OLD, NEW, LATER = 1.0, 2.0, 3.0
BOUND_S = 120  # any one subprocess; a hang fails the test instead of the suite
USER_FILES = {"notes.txt": b"the user's own file", ".keep": b""}


def _env(kill_at: int | None = None) -> dict:
    env = dict(os.environ)
    env.pop("SPMD_TEST_FAIL_AT_FS_STEP", None)
    env.pop("SPMD_TEST_KILL_AT_FS_STEP", None)
    if kill_at is not None:
        env["SPMD_TEST_KILL_AT_FS_STEP"] = str(kill_at)
    return env


def _script(directory, value: float, how: str, repeat: int = 1) -> list[str]:
    return [sys.executable, str(SCRIPT), str(directory), str(value), how, str(repeat)]


def _save_killed_at(directory, kill_at: int, how: str) -> int:
    proc = subprocess.run(_script(directory, NEW, how), env=_env(kill_at), capture_output=True,
                          text=True, timeout=BOUND_S)
    assert proc.returncode in (0, -9), proc.stderr[-2000:]
    return proc.returncode


def _save_here(directory, value: float, how: str, names=None):
    with fluid.scope_guard(fluid.Scope()):
        save(str(directory), value, how, names=names)


def _load(directory, how: str) -> dict:
    """{variable: array} as spmd loads `directory` saved the way `how`."""
    prog, scope = program(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        if how == "per_file":
            fluid.io.load_persistables(exe, str(directory), prog)
        elif how == "one_file":
            fluid.io.load_persistables(exe, str(directory), prog, filename="all")
        elif how == "paddle2":
            fluid.load(prog, str(directory / "m"), exe)
        else:
            fluid.io.load_inference_model(str(directory), exe)
    names = INFERENCE_VARS if how == "inference" else SHAPES
    return {name: np.array(scope.get(name)) for name in names}


def _one_value(values: dict, where: str) -> float:
    """The value every variable holds; a mix of saves fails."""
    firsts = {float(v.flat[0]) for v in values.values()}
    uniform = all((v == v.flat[0]).all() for v in values.values())
    assert len(firsts) == 1 and uniform, f"{where}: a mix of checkpoints {values}"
    return firsts.pop()


def _visible(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def _hidden(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


def _old_checkpoint(tmp_path, how: str) -> pathlib.Path:
    old = tmp_path / "old"
    _save_here(old, OLD, how)
    for name, data in USER_FILES.items():
        (old / name).write_bytes(data)
    return old


def _after_kill(killed, how: str, kill_at: int, expected_visible: list[str]) -> float:
    """Check one killed save two ways (a load first; a smaller save first); its outcome."""
    saved_first = killed.with_name(killed.name + "_then_save")
    shutil.copytree(killed, saved_first)
    where = f"{how}, killed at move {kill_at}"
    assert _visible(killed) == expected_visible, where  # nothing half-made under a real name
    outcome = _one_value(_load(killed, how), where)
    journals = [n for n in _hidden(killed) if n.startswith(".spmd-journal.")
                and n.endswith(".json")]
    assert not journals, where  # the load finished the interrupted save
    # a save of one variable: it finishes the interrupted save before its own, and removes
    # the dead process's temporaries, never the user's files
    _save_here(saved_first, LATER, "per_file", names=["c"])
    assert _hidden(saved_first) == sorted([MANIFEST, ".keep"]), where
    assert (saved_first / "notes.txt").read_bytes() == USER_FILES["notes.txt"], where
    values = _load(saved_first, how)
    if how == "per_file":
        assert float(values.pop("c").flat[0]) == LATER, where
    assert _one_value(values, where) == outcome, where
    return outcome


@pytest.mark.parametrize("how", WAYS)
def test_a_save_killed_at_any_move_leaves_the_old_or_the_new_checkpoint(tmp_path, how):
    old = _old_checkpoint(tmp_path, how)
    expected_visible = _visible(old)
    outcomes = []
    for kill_at in range(1, 100):
        killed = tmp_path / f"k{kill_at}"
        shutil.copytree(old, killed)
        code = _save_killed_at(killed, kill_at, how)
        outcome = _after_kill(killed, how, kill_at, expected_visible)
        if code == 0:  # the save made fewer moves than kill_at: every one was swept
            assert outcome == NEW
            break
        outcomes.append("old" if outcome == OLD else "new")
    else:
        raise AssertionError("the save never finished within 99 moves")
    # n files take 2n + 5 moves; the journal becoming current (move n + 2) is the commit point
    n = (len(outcomes) - 5) // 2
    assert len(outcomes) == 2 * n + 5 and n >= 1, outcomes
    assert outcomes == ["old"] * (n + 1) + ["new"] * (n + 4), outcomes


def _run_all(procs, what: str):
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError(f"{what} still running after {BOUND_S} s") from None
        assert proc.returncode == 0, err[-2000:]


def test_processes_saving_into_one_directory_leave_one_whole_checkpoint(tmp_path):
    """As ranks of a data-parallel job that all save into one directory."""
    procs = [subprocess.Popen(_script(tmp_path, first, "per_file", repeat=4), env=_env(),
                              stderr=subprocess.PIPE, text=True) for first in (10.0, 20.0)]
    _run_all(procs, "two concurrent savers")
    assert _one_value(_load(tmp_path, "per_file"), "after both saves") in (13.0, 23.0)
    assert _hidden(tmp_path) == [MANIFEST]


def test_a_load_beside_a_running_save_sees_one_save_whole(tmp_path):
    _save_here(tmp_path, 0.0, "per_file")
    saver = subprocess.Popen(_script(tmp_path, 100.0, "per_file", repeat=20), env=_env(),
                             stderr=subprocess.PIPE, text=True)
    seen, deadline = [], time.monotonic() + BOUND_S
    try:
        while saver.poll() is None and time.monotonic() < deadline:
            seen.append(_one_value(_load(tmp_path, "per_file"), f"load {len(seen)}"))
    finally:
        _run_all([saver], "the saver")
    seen.append(_one_value(_load(tmp_path, "per_file"), "the last load"))
    assert set(seen) <= {0.0, *(100.0 + i for i in range(20))}, seen
    assert seen[-1] == 119.0 and seen == sorted(seen), seen


def test_another_hosts_temporaries_are_removed_once_a_day_old(tmp_path):
    _save_here(tmp_path, OLD, "per_file")
    old = tmp_path / ".a.npy.elsewhere.4242.0123456789ab.tmp"
    young = tmp_path / ".b.npy.elsewhere.4243.0123456789ab.tmp"
    for path in (old, young):
        path.write_bytes(b"a save still running on another host, or long dead")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    assert _one_value(_load(tmp_path, "per_file"), "beside temporaries") == OLD  # ignored
    _save_here(tmp_path, NEW, "per_file")
    assert _hidden(tmp_path) == sorted([MANIFEST, young.name])


def test_a_failed_save_keeps_the_old_checkpoint_and_leaves_nothing(tmp_path, monkeypatch):
    _save_here(tmp_path, OLD, "per_file")

    def files():  # the subfolder's file (cell/e.npy) too
        return {str(p.relative_to(tmp_path)): p.read_bytes()
                for p in tmp_path.rglob("*") if p.is_file()}

    before = files()
    last = len(SHAPES)
    for move in (1, last, last + 1):  # the first file, the last file, the journal's temporary
        monkeypatch.setenv("SPMD_TEST_FAIL_AT_FS_STEP", str(move))
        with pytest.raises(OSError, match=f"injected failure at move {move}"):
            _save_here(tmp_path, NEW, "per_file")
        assert files() == before


def test_a_variable_named_up_to_the_file_name_limit_saves_and_loads(tmp_path):
    name = "v" * 250  # with ".npy", 254 bytes: the staging name must not be longer
    prog = fluid.Program()
    prog.global_block().create_parameter(name=name, shape=[2], dtype="float32")
    with fluid.scope_guard(fluid.Scope()):
        fluid.global_scope().var(name).get_tensor().set(np.array([1, 2], "float32"))
        fluid.io.save_persistables(fluid.Executor(), str(tmp_path), prog)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(fluid.Executor(), str(tmp_path), prog)
    assert np.array(scope.get(name)).tolist() == [1, 2]
    assert _hidden(tmp_path) == [MANIFEST]
