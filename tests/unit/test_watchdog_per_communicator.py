"""One watchdog per communicator (spmd/comm/watchdog.py), seen through its public knobs: every
form of wait (blocking, async, at once, bucketed, several at once) registers with the
communicator's watchdog while it lasts (`comm.watchdog.watching()`), its timeout is the
communicator's `timeout_s`, and it alone says what a wait that fails reports. In one process:
the places of a LocalGroup, and the watchdog's polled wait driven directly. A wait that ends
the job (os._exit) is tested in a job of its own: tests/dist/test_comm_watchdog.py.

No test here asserts a duration: a wait is released only once the watchdog shows it, and the
timeouts that fail on purpose are checked for what they say.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spmd import events
from spmd.comm.base import SelfCommunicator
from spmd.comm.local import LocalGroup
from spmd.comm.watchdog import ASYNC, AT_ONCE, BLOCKING, Watchdog
from spmd.errors import CommunicationError
from spmd.status_file import read_status

HANG_GUARD_S = 60.0  # a wait the test expects to see within this is a hang if it never shows


def _until(condition, what: str):
    """Poll `condition()` until true; fail after HANG_GUARD_S (a hang, not a slow machine)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened")
        time.sleep(0.001)


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised by the test
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_each_communicator_has_one_watchdog_with_its_timeout():
    group = LocalGroup(2, timeout_s=30.0)
    first, second = group.communicator(0), group.communicator(1)
    assert first.watchdog is first.watchdog  # made once
    assert first.watchdog is not second.watchdog
    assert first.watchdog.communicator is first
    assert first.timeout_s == first.watchdog.timeout_s == 30.0
    first.timeout_s = 12.5  # the communicator's timeout is its watchdog's
    assert first.watchdog.timeout_s == 12.5 and second.timeout_s == 30.0
    assert first.watchdog.watching() == [] and SelfCommunicator().watchdog.watching() == []


def test_the_default_timeout_is_spmd_collective_timeout(monkeypatch):
    monkeypatch.setenv("SPMD_COLLECTIVE_TIMEOUT", "7")
    assert SelfCommunicator().timeout_s == 7.0
    assert LocalGroup(2).communicator(0).watchdog.timeout_s == 7.0


# form of the call -> the forms of wait place 0's watchdog watches while place 1 stays away
FORMS = {
    "blocking": (lambda c, x: c.allreduce(x), {BLOCKING}),
    "async": (lambda c, x: c.iallreduce(x).wait(), {ASYNC, BLOCKING}),
    "wait_all": (lambda c, x: (c.iallreduce(x), c.wait_all(), x)[-1], {ASYNC, BLOCKING}),
    "at once": (lambda c, x: c.iallreduce(x, overlap=False).wait(), {AT_ONCE, BLOCKING}),
    "bucketed": (lambda c, x: c.iallreduce_bucket([x[:1], x[1:]]).wait(), {ASYNC, BLOCKING}),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_of_wait_registers_with_the_communicators_watchdog(form):
    """Place 0 waits in an allreduce place 1 has not reached: its watchdog watches that wait
    (on the caller's thread, and the communication thread's part of it), and nothing once the
    allreduce completed."""
    call, forms = FORMS[form]
    group = LocalGroup(2, timeout_s=HANG_GUARD_S)
    waiting, late = group.communicator(0), group.communicator(1)
    thread, box = _in_thread(lambda: call(waiting, np.ones(2)))
    watchdog = waiting.watchdog
    _until(lambda: {w.form for w in watchdog.watching()} == forms, f"place 0's {form} wait")
    assert {w.op for w in watchdog.watching()} == {"allreduce"}
    assert all(w.waiter is waiting for w in watchdog.watching())
    assert "[rank 0/2] waits in allreduce" in repr(watchdog.watching()[0])
    assert late.watchdog.watching() == []  # the late place waits in nothing yet
    late_result = late.allreduce(np.ones(2))
    thread.join(HANG_GUARD_S)
    assert "error" not in box, box.get("error")
    result = box["result"]
    result = np.concatenate([np.ravel(r) for r in result]) if form == "bucketed" else result
    np.testing.assert_array_equal(result, [2.0, 2.0])
    np.testing.assert_array_equal(late_result, [2.0, 2.0])
    _until(lambda: watchdog.watching() == [], "the wait's end")  # the worker's part ends too
    waiting.close()
    late.close()


def test_a_place_that_never_arrives_fails_the_wait_with_the_watchdogs_timeout():
    group = LocalGroup(2, timeout_s=HANG_GUARD_S)
    comm = group.communicator(0)
    comm.timeout_s = 0.05  # the watchdog's, not the group's, decides
    with pytest.raises(CommunicationError, match=r"\[place 0/2\] barrier: another place of "
                                                 r"this process failed or did not arrive "
                                                 r"within 0\.05 s"):
        comm.barrier()
    assert comm.watchdog.watching() == []


class _Request:
    """A posted collective that completes when the test says so."""

    def __init__(self):
        self.complete = threading.Event()

    def test(self) -> bool:
        return self.complete.is_set()


def test_a_polled_wait_past_the_timeout_raises_the_hang_report():
    watchdog = Watchdog(SelfCommunicator(), timeout_s=0.05)
    gave_up = []
    with pytest.raises(CommunicationError) as caught:
        watchdog.poll("allreduce", _Request().test, give_up=lambda: gave_up.append(1))
    assert str(caught.value) == (
        "[rank 0/1] allreduce did not complete within 0.05 s: another rank never reached it "
        "(crashed, hung, or runs a different program); raise SPMD_COLLECTIVE_TIMEOUT if a "
        "step is legitimately slower")
    assert gave_up == [1] and watchdog.watching() == []


def test_the_hang_report_names_the_step_where_asked_and_the_missing_ranks():
    class Tracked(SelfCommunicator):
        def missing(self):
            return "rank(s) 1 (its last was #1, barrier) never reached it"

    watchdog = Tracked().watchdog
    watchdog.timeout_s = 0.05
    with pytest.raises(CommunicationError, match=r"^\[rank 0/1\] NCCL allreduce \(in "
                                                 r"Executor\.run #\d+\) did not complete "
                                                 r"within 0\.05 s: rank\(s\) 1 \(its last was "
                                                 r"#1, barrier\) never reached it"):
        watchdog.poll("NCCL allreduce", _Request().test, names_step=True)


class _PeerLeft(events.NoSupervision):
    """A supervision saying a peer left before the current collective."""

    def __init__(self):
        self.asked, self.spoke = [], 0

    def departure_message(self, op, tag):
        self.asked.append((op, tag))
        return f"{tag} rank 1 left the job while this rank waits in {op}"

    def let_the_reporter_speak(self):
        self.spoke += 1


def test_a_peer_that_left_fails_a_polled_wait_with_the_guards_words(monkeypatch):
    news = _PeerLeft()
    monkeypatch.setattr(events, "supervision", news)
    watchdog = Watchdog(SelfCommunicator(), timeout_s=HANG_GUARD_S)
    gave_up = []
    with pytest.raises(CommunicationError,
                       match=r"^\[rank 0/1\] rank 1 left the job while this rank waits in "
                             r"broadcast\(root=0\)$"):
        watchdog.poll("broadcast(root=0)", _Request().test, give_up=lambda: gave_up.append(1))
    assert news.asked == [("broadcast(root=0)", "[rank 0/1]")]
    assert news.spoke == 1 and gave_up == [1]


def test_a_long_wait_is_in_the_status_file_until_it_ends(tmp_path, monkeypatch):
    path = tmp_path / "status"
    monkeypatch.setenv("SPMD_STATUS_FILE", str(path))
    watchdog = Watchdog(SelfCommunicator(), timeout_s=HANG_GUARD_S)
    request = _Request()
    thread, box = _in_thread(lambda: watchdog.poll("allgather", request.test))
    _until(lambda: path.exists() and read_status(str(path)).waiting, "the wait's record")
    assert [op for op, _ in read_status(str(path)).waiting] == ["allgather"]
    assert [w.op for w in watchdog.watching()] == ["allgather"]
    request.complete.set()
    thread.join(HANG_GUARD_S)
    assert "error" not in box, box.get("error")
    assert read_status(str(path)).waiting == []  # its `done` closed it
    assert watchdog.watching() == []


def test_a_wait_that_fails_stays_open_in_the_status_file(tmp_path, monkeypatch):
    """The launcher's report says a failed rank was waiting in its op: no `done` for it."""
    path = tmp_path / "status"
    monkeypatch.setenv("SPMD_STATUS_FILE", str(path))
    watchdog = Watchdog(SelfCommunicator(), timeout_s=HANG_GUARD_S)

    def done():  # the backend's own error (NCCL's async error state), once the wait is noted
        if path.exists() and read_status(str(path)).waiting:
            raise CommunicationError("the backend failed")
        return False

    with pytest.raises(CommunicationError, match="the backend failed"):
        watchdog.poll("reduce_scatter", done)
    assert [op for op, _ in read_status(str(path)).waiting] == ["reduce_scatter"]
    assert watchdog.watching() == []
