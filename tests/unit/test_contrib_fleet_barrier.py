"""fluid.incubate.fleet.utils.fleet_barrier_util.check_all_trainers_ready: trainers meet
through their ready files in one HDFS folder (a stand-in `hadoop` over a local folder, as in
test_fluid_hdfs.py)."""
from __future__ import annotations

import threading

import pytest
from test_fluid_hdfs import hadoop  # noqa: F401 - the stand-in hadoop fixture

from spmd.fleet.parameter_server import DistributedTranspiler
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.utils import fleet_barrier_util

SERVERS = ["127.0.0.1:6170"]


def _fleet(trainer_id, trainers):
    f = DistributedTranspiler()
    f.init(role_maker.UserDefinedRoleMaker(trainer_id, role_maker.Role.WORKER, trainers,
                                           SERVERS))
    return f


@pytest.fixture
def barrier_env(hadoop, tmp_path, monkeypatch):  # noqa: F811 - the fixture above
    home, root = hadoop
    monkeypatch.setenv("HADOOP_HOME", home)
    monkeypatch.setenv("FS_NAME", "hdfs://nn:9000")
    monkeypatch.setenv("FS_UGI", "user,pass")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fleet_barrier_util, "POLL_SECONDS", 0.05)
    return root


def test_the_last_trainer_releases_the_barrier(barrier_env, monkeypatch, capsys):
    root = barrier_env
    monkeypatch.setattr(fleet_barrier_util, "fleet", _fleet(1, 2))
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (
        fleet_barrier_util.check_all_trainers_ready("/job/ready", 3), done.set()))
    waiter.start()
    mine = root / "job" / "ready" / "ready.3.1.done"
    try:
        for _ in range(600):  # its file lands first (each hadoop call is a process)
            if mine.exists() or done.is_set():
                break
            done.wait(0.05)
        assert mine.exists(), "trainer 1 did not put its ready file"
        assert not done.wait(2.0), "trainer 1 passed the barrier alone"
        # trainer 0 arrives: its file makes two of two
        (root / "job" / "ready" / "ready.3.0.done").write_text("")
        assert done.wait(30), "the barrier did not release with both trainers ready"
    finally:
        waiter.join(30)
    out = capsys.readouterr().out
    assert "PUT ready.3.1.done ON HDFS /job/ready OK" in out
    assert "have 1 trainers need to be ready" in out
    assert "All trainers are ready, continue training" in out


def test_one_trainer_passes_at_once(barrier_env, monkeypatch):
    monkeypatch.setattr(fleet_barrier_util, "fleet", _fleet(0, 1))
    fleet_barrier_util.check_all_trainers_ready("/ready", 0)
    assert (barrier_env / "ready" / "ready.0.0.done").exists()
