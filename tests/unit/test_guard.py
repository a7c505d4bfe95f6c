"""spmd.guard's pieces in one process: the supervisors' channel over real sockets (three
supervisors: rank 0's and two others), and the shared state a program reads departures from.
The whole (forks, launchers, real faults) is tested by tests/launch/test_fault_matrix.py."""
from __future__ import annotations

import socket

import pytest

from spmd.guard import state as st
from spmd.guard.channel import Channel, candidate_addresses, listen

ONE_NODE = {"PMI_RANK": "0", "PMI_SIZE": "3", "MPI_LOCALNRANKS": "3"}  # rank 0 listens on loopback


def _three_supervisors():
    listener = listen(env=ONE_NODE)
    seen = {0: [], 1: [], 2: []}
    channels = [Channel(0, 3, listener, seen[0].append)]
    addresses = candidate_addresses(listener.getsockname()[1])
    for rank in (1, 2):
        channel = Channel(rank, 3, None, seen[rank].append)
        assert channel.connect(addresses)
        channels.append(channel)
    _pump(channels, lambda: channels[0].peers_connected == 2)
    return channels, seen, listener


def _pump(channels, until, rounds: int = 200):
    for _ in range(rounds):
        if until():
            return
        for channel in channels:
            channel.poll(0.01)
    raise AssertionError("the channel did not get there")


def test_a_departure_reaches_every_other_supervisor_and_the_last_one_ends_the_job():
    channels, seen, listener = _three_supervisors()
    try:
        channels[1].leave({"code": 0, "signal": 0, "collectives": 8, "steps": 2,
                           "how": st.EXITED_UNCLEANLY})
        _pump(channels, lambda: seen[0] and seen[2])
        assert seen[1] == []  # nobody tells a rank about itself
        for rank in (0, 2):
            assert seen[rank] == [{"rank": 1, "code": 0, "signal": 0, "collectives": 8,
                                   "steps": 2, "how": st.EXITED_UNCLEANLY}]
        assert not any(c.all_done for c in channels)
        channels[2].leave({"code": 0, "signal": 0, "collectives": 9, "steps": 3,
                           "how": st.SCRIPT_ENDED})
        channels[0].leave({"code": 0, "signal": 0, "collectives": 9, "steps": 3,
                           "how": st.SCRIPT_ENDED})
        _pump(channels, lambda: all(c.all_done for c in channels))
        assert sorted(d["rank"] for d in seen[1]) == [0, 2]
    finally:
        listener.close()


def test_a_broken_connection_is_a_departure_of_unknown_progress():
    channels, seen, listener = _three_supervisors()
    try:
        channels[2].close()  # what a SIGKILL does to its socket
        _pump(channels[:2], lambda: seen[0] and seen[1])
        assert seen[0][0]["rank"] == 2 and seen[0][0]["how"] == st.LOST
        assert seen[1][0]["collectives"] == -1
    finally:
        listener.close()


def test_rank_0_gone_is_seen_by_the_others_even_without_a_message():
    channels, seen, listener = _three_supervisors()
    channels[0].close()  # a killed rank 0
    _pump(channels[1:], lambda: seen[1] and seen[2])
    assert seen[1][0]["rank"] == 0 and channels[1].all_done


def test_connect_tries_each_address_in_turn():
    listener = listen(env=ONE_NODE)
    try:
        port = listener.getsockname()[1]
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            dead = unused.getsockname()[1]
        channel = Channel(1, 2, None, lambda info: None)
        assert channel.connect(f"127.0.0.1:{dead},127.0.0.1:{port}", timeout_s=1.0)
        assert not Channel(1, 2, None, lambda info: None).connect(f"127.0.0.1:{dead}",
                                                                 timeout_s=1.0)
    finally:
        listener.close()


def test_shared_state_keeps_the_first_departure_and_the_address():
    shared = st.SharedState(shared=False)
    assert shared.departure() is None
    shared.record_departure(2, 0, 9, 5, 1, st.FAILED)
    shared.record_departure(1, 3, 0, 7, 2, st.SCRIPT_ENDED)
    assert shared.departure() == {"rank": 2, "code": 0, "signal": 9, "collectives": 5,
                                  "steps": 1, "how": st.FAILED}
    shared.set_address("node1:4242,127.0.0.1:4242")
    assert shared.address() == "node1:4242,127.0.0.1:4242"


@pytest.mark.parametrize("mine, theirs, fails", [(5, 5, False), (6, 5, True), (6, -1, True)])
def test_a_rank_fails_only_in_a_collective_the_departed_rank_never_joined(mine, theirs, fails):
    import spmd.guard as guard

    shared = st.SharedState(shared=False)
    shared.slots[st.COLLECTIVES] = mine
    shared.record_departure(1, 0, 0, theirs, 2, st.EXITED_UNCLEANLY)
    guard.attach(shared)
    try:
        message = guard.departure_message("allreduce", "[rank 0/2]")
    finally:
        guard.attach(None)
    if not fails:
        assert message is None
        return
    assert message.startswith("[rank 0/2] rank 1 left the job")
    assert f"while this rank waits in allreduce, collective #{mine}" in message
    assert "os._exit" in message
