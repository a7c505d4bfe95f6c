"""fleet.save_check_point / load_check_point / clean_redundant_check_points, TrainStatus,
LocalFS and all_reduce_worker in one process, against fluid 1.8.5's behaviour
(tests/oracle/data/fleet_checkpoint.json, made by tests/oracle/make_fleet_checkpoint.py).
Atomicity: a save that fails or is killed at any move leaves the checkpoints there were.
(tests/dist/mpi/test_fleet_checkpoint.py runs them on 1-4 ranks.)"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.distributed import fs_wrapper
from spmd.errors import InvalidArgumentError, NotFoundError, PreconditionError
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import TrainStatus, fleet
from spmd.fluid.incubate.fleet.utils.fs import FSFileExistsError, FSFileNotExistsError, LocalFS
from spmd.io.files import MANIFEST
from tests.oracle_io import load

ORACLE = load("fleet_checkpoint")
EPOCHS, SAVED_AFTER = 4, 1
FEED = np.linspace(-1, 1, 15).reshape(5, 3).astype("float32")
PREFIX = "__paddle_fleet_checkpoint__"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build():
    """The oracle's model: constant-initialized fc(4, tanh) -> fc(2), Adam(0.05)."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.fc(x, 4, act="tanh", param_attr=fluid.initializer.Constant(0.3))
        y = fluid.layers.fc(h, 2, param_attr=fluid.initializer.Constant(-0.2))
        loss = fluid.layers.mean(fluid.layers.square(y - 1.0))
        fluid.optimizer.Adam(0.05).minimize(loss)
    return main, start, loss


@pytest.fixture
def model():
    """(main, loss, exe) with the startup program run in a scope of the test's own."""
    main, start, loss = build()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        yield main, loss, exe


def step(model) -> float:
    main, loss, exe = model
    return float(exe.run(main, feed={"x": FEED}, fetch_list=[loss])[0][0])


def tree(root) -> dict:
    """{entry: its files} as fluid lists them: spmd's manifest (a dotfile) aside."""
    out = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        out[name] = (sorted(n for n in os.listdir(path) if n != MANIFEST)
                     if os.path.isdir(path) else "file")
    return out


def persistables(program) -> dict:
    return {v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
            for v in fluid.io.get_program_persistable_vars(program)}


# -- fluid's layout and answers --------------------------------------------------------------------
def test_layout_status_file_and_cleaning_match_fluid(tmp_path, model):
    main = model[0]
    root = str(tmp_path / "all")
    for epoch in range(EPOCHS):
        step(model)
        fleet.save_check_point(model[2], root, TrainStatus(epoch), main_program=main)
    assert tree(root) == ORACLE["layout_all"]
    with open(os.path.join(root, f"{PREFIX}.2", "fleet_train_status")) as f:
        assert json.load(f) == ORACLE["status_file"]
    fleet.clean_redundant_check_points(root, checkpoint_num=2)
    assert sorted(os.listdir(root)) == ORACLE["after_clean_2"]
    last = str(tmp_path / "last")
    for epoch in range(3):
        fleet.save_check_point(model[2], last, TrainStatus(epoch), main_program=main,
                               remain_all_checkpoint=False)
    assert sorted(os.listdir(last)) == ORACLE["layout_remain_last"]


def test_resume_equals_uninterrupted_and_fluid(tmp_path):
    main, start, loss = build()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        uninterrupted = [step((main, loss, exe)) for _ in range(EPOCHS)]
        final = persistables(main)
    np.testing.assert_allclose(uninterrupted, np.ravel(ORACLE["uninterrupted_losses"]),
                               rtol=1e-5)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        for _ in range(SAVED_AFTER + 1):
            step((main, loss, exe))
        fleet.save_check_point(exe, str(tmp_path), TrainStatus(SAVED_AFTER), main_program=main)
    fresh, fresh_start, fresh_loss = build()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(fresh_start)
        status = fleet.load_check_point(exe, str(tmp_path), 0, main_program=fresh)
        assert status == TrainStatus(ORACLE["resumed_status"])
        resumed = [step((fresh, fresh_loss, exe)) for _ in range(status.next(), EPOCHS)]
        got = persistables(fresh)
    assert resumed == uninterrupted[status.next():]  # bit for bit
    np.testing.assert_allclose(resumed, np.ravel(ORACLE["resumed_losses"]), rtol=1e-5)
    for name, value in final.items():
        np.testing.assert_array_equal(got[name], value)


def test_load_without_checkpoints(tmp_path, model):
    main, _, exe = model
    assert ORACLE["load_missing_path"] == {"result": "ok", "value": None}
    assert fleet.load_check_point(exe, str(tmp_path / "empty"), 0, main_program=main) is None
    assert ORACLE["load_missing_strict"]["result"] == "AssertionError"
    with pytest.raises(AssertionError, match="no checkpoint in .*ignore_empty=True") as e:
        fleet.load_check_point(exe, str(tmp_path / "empty"), 0, main_program=main,
                               ignore_empty=False)
    assert isinstance(e.value, NotFoundError)
    os.makedirs(tmp_path / "junk" / f"{PREFIX}.7.tmp")  # fluid's leftover of a dead save
    os.makedirs(tmp_path / "junk" / f"{PREFIX}.x")
    assert ORACLE["load_only_leftovers"]["value"] is None
    assert fleet.load_check_point(exe, str(tmp_path / "junk"), 0, main_program=main) is None


def test_train_status_as_fluid():
    want = ORACLE["train_status"]
    s = TrainStatus(3)
    assert (TrainStatus().next(), s.next(), s == TrainStatus(3), s != TrainStatus(2)) == (
        want["default_next"], want["next"], want["eq"], want["ne"])
    assert s.epoch_no == 3 and TrainStatus().epoch_no == -1
    assert s != "3" and len({TrainStatus(1), TrainStatus(1)}) == 1


def test_program_defaults_to_the_trained_one(tmp_path):
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fleet.distributed_optimizer(fluid.optimizer.Adam(0.1)).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(fleet.startup_program)
        exe.run(fleet.main_program, feed={"x": FEED})
        fleet.save_check_point(exe, str(tmp_path), TrainStatus(0))
        saved = persistables(main)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(fleet.startup_program)
        assert fleet.load_check_point(exe, str(tmp_path), 0) == TrainStatus(0)
        for name, value in persistables(main).items():
            np.testing.assert_array_equal(value, saved[name])


def test_bad_arguments_are_named(tmp_path, model):
    main, _, exe = model
    with pytest.raises(InvalidArgumentError, match="train_status must be a TrainStatus"):
        fleet.save_check_point(exe, str(tmp_path), 3, main_program=main)
    with pytest.raises(InvalidArgumentError, match="trainer_id must be an int"):
        fleet.load_check_point(exe, str(tmp_path), "0", main_program=main)
    fleet.save_check_point(exe, str(tmp_path), TrainStatus(0), main_program=main)
    with open(tmp_path / f"{PREFIX}.0" / "fleet_train_status", "w") as f:
        f.write('{"epoch": 1}')
    with pytest.raises(InvalidArgumentError, match="fleet_train_status"):
        fleet.load_check_point(exe, str(tmp_path), 0, main_program=main)


# -- atomic ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail_at", [1, 2, 3, 5])
def test_failed_save_leaves_the_checkpoints_there_were(tmp_path, model, monkeypatch, fail_at):
    main, _, exe = model
    fleet.save_check_point(exe, str(tmp_path), TrainStatus(0), main_program=main)
    before = tree(str(tmp_path))
    monkeypatch.setenv("SPMD_TEST_FAIL_AT_FS_STEP", str(fail_at))
    with pytest.raises(OSError, match="injected failure"):
        fleet.save_check_point(exe, str(tmp_path), TrainStatus(1), main_program=main)
    monkeypatch.delenv("SPMD_TEST_FAIL_AT_FS_STEP")
    assert tree(str(tmp_path)) == before  # nothing left behind, not even a private directory
    assert fleet.load_check_point(exe, str(tmp_path), 0, main_program=main) == TrainStatus(0)


SAVER = """
import sys
sys.path.insert(0, {root!r})
import spmd.fluid as fluid
from spmd.fluid.incubate.fleet.collective import TrainStatus, fleet
from tests.unit.test_fleet_checkpoint import build
main, start, loss = build()
exe = fluid.Executor(fluid.CPUPlace())
exe.run(start)
fleet.save_check_point(exe, {path!r}, TrainStatus(int(sys.argv[1])), main_program=main)
"""


@pytest.mark.parametrize("kill_at", [1, 3, 5, 7])  # the moves of the first file
def test_killed_save_leaves_the_checkpoints_there_were(tmp_path, model, kill_at):
    main, _, exe = model
    root = str(tmp_path / "ck")
    fleet.save_check_point(exe, root, TrainStatus(0), main_program=main)
    script = SAVER.format(root=ROOT, path=root)
    env = dict(os.environ, SPMD_TEST_KILL_AT_FS_STEP=str(kill_at))
    proc = subprocess.run([sys.executable, "-c", script, "1"], env=env, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert [n for n in os.listdir(root) if not n.startswith(".")] == [f"{PREFIX}.0"]
    assert fleet.load_check_point(exe, root, 0, main_program=main) == TrainStatus(0)
    fleet.save_check_point(exe, root, TrainStatus(1), main_program=main)  # removes the dead
    assert sorted(os.listdir(root)) == [f"{PREFIX}.0", f"{PREFIX}.1"]
    assert fleet.load_check_point(exe, root, 0, main_program=main) == TrainStatus(1)


def test_concurrent_savers_take_distinct_numbers(tmp_path, model):
    main, _, exe = model
    errors = []

    def saver(epoch):
        try:
            for _ in range(3):
                fleet.save_check_point(exe, str(tmp_path), TrainStatus(epoch), main_program=main)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=saver, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert sorted(os.listdir(tmp_path)) == sorted(f"{PREFIX}.{n}" for n in range(12))
    for n in range(12):
        files = set(os.listdir(tmp_path / f"{PREFIX}.{n}")) - {MANIFEST}
        assert files == {"_paddle_fleet_param__", "fleet_train_status"}


class UploadingFS(LocalFS):
    """A remote file system stand-in: checkpoints go through the local cache."""

    def need_upload_download(self):
        return True


def test_file_system_with_upload_download(tmp_path, model):
    main, _, exe = model
    fs, remote, cache = UploadingFS(), str(tmp_path / "remote"), str(tmp_path / "cache")
    saved = persistables(main)
    for epoch in range(2):
        fleet.save_check_point(exe, remote, TrainStatus(epoch), main_program=main, fs=fs,
                               local_cache_path=cache, remain_all_checkpoint=False)
    assert sorted(os.listdir(remote)) == [f"{PREFIX}.1"]
    assert os.listdir(cache) == []  # the cache of each save is removed after its upload
    step(model)
    status = fleet.load_check_point(exe, remote, 3, main_program=main, fs=fs,
                                    local_cache_path=cache)
    assert status == TrainStatus(1) and os.listdir(cache) == []
    for name, value in persistables(main).items():
        np.testing.assert_array_equal(value, saved[name])


# -- LocalFS ---------------------------------------------------------------------------------------
def test_local_fs_both_faces(tmp_path):
    fs, old = LocalFS(), fs_wrapper.LocalFS()
    assert fs.list_dirs(str(tmp_path / "nope")) == ORACLE["localfs"]["list_dirs_missing"]
    assert fs.need_upload_download() is ORACLE["localfs"]["need_upload_download"] is False
    fs.mkdirs(str(tmp_path / "a" / "b"))
    fs.touch(str(tmp_path / "f"))
    assert fs.ls_dir(str(tmp_path)) == (["a"], ["f"])
    assert old.ls_dir(str(tmp_path)) == ["a", "f"]  # fluid 1.8.5's fs_wrapper: one list
    assert fs.list_dirs(str(tmp_path)) == ["a"]
    assert fs.is_file(str(tmp_path / "f")) and fs.is_dir(str(tmp_path / "a"))
    assert old.stat(str(tmp_path / "f")) and not fs.is_exist(str(tmp_path / "g"))
    with pytest.raises(FSFileExistsError, match="exist_ok=True"):
        fs.touch(str(tmp_path / "f"), exist_ok=False)
    with pytest.raises(FSFileExistsError, match="is already a file"):
        fs.mkdirs(str(tmp_path / "f"))
    fs.mv(str(tmp_path / "f"), str(tmp_path / "g"))
    with pytest.raises(FSFileNotExistsError, match="does not exist"):
        fs.mv(str(tmp_path / "f"), str(tmp_path / "h"))
    fs.touch(str(tmp_path / "h"))
    with pytest.raises(FSFileExistsError, match="overwrite=True"):
        fs.mv(str(tmp_path / "g"), str(tmp_path / "h"))
    fs.mv(str(tmp_path / "g"), str(tmp_path / "h"), overwrite=True)
    fs.rename(str(tmp_path / "h"), str(tmp_path / "i"))
    fs.delete(str(tmp_path / "a"))
    fs.delete(str(tmp_path / "i"))
    fs.delete(str(tmp_path / "nothing"))
    assert os.listdir(tmp_path) == []


# -- all_reduce_worker -----------------------------------------------------------------------------
def test_all_reduce_worker_in_one_process():
    # fluid 1.8.5's collective role maker only prints a warning and leaves output alone; spmd
    # reduces over the workers, which in one process is a copy
    assert "does not have all reduce" in ORACLE["all_reduce_worker_collective"]["printed"]
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    out = np.zeros(2)
    fleet.all_reduce_worker(np.array([1.0, 2.0]), out)
    np.testing.assert_array_equal(out, [1.0, 2.0])
    as_list = [0, 0, 0]
    fleet.all_reduce_worker([3, 4, 5], as_list, mode="max")
    assert as_list == [3, 4, 5] and all(type(v) is int for v in as_list)
    with pytest.raises(InvalidArgumentError, match="unknown mode 'avg'"):
        fleet.all_reduce_worker([1], [0], mode="avg")
    with pytest.raises(InvalidArgumentError, match="1-D array.*np.ravel"):
        fleet.all_reduce_worker(np.ones((2, 2)), np.zeros(4))
    with pytest.raises(InvalidArgumentError, match="output has 3 elements, input 2"):
        fleet.all_reduce_worker([1, 2], [0, 0, 0])
    with pytest.raises(InvalidArgumentError, match="output is float32, input float64"):
        fleet.all_reduce_worker(np.ones(2), np.zeros(2, "float32"))


def test_user_defined_roles_need_as_many_processes():
    role = role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:1", "127.0.0.1:2"])
    with pytest.raises(PreconditionError, match="2 workers but MPI connects 1"):
        role.all_reduce_worker(np.ones(2), np.zeros(2))


def test_cleaning_a_missing_root_is_nothing(tmp_path):
    fleet.clean_redundant_check_points(str(tmp_path / "none"))
    shutil.rmtree(tmp_path)
