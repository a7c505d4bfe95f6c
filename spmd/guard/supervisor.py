"""The supervisor: a fork made before MPI starts. The child returns and runs the rank's program;
the parent waits for it and speaks for it on the supervisors' channel (spmd/guard/channel.py).

Why a parent: only a parent sees how a process ended (an exit code, os._exit, SIGKILL), and only
a process that is still alive can keep the job from looking successful. When the program ends
with 0 while peers still run, the parent holds its own exit until every rank has left (as
MPI_Finalize holds a clean exit): a launcher such as MPICH's Hydra ends the whole job, with
code 0, as soon as one of its processes exits. Peers waiting in a collective the departed rank
will never join hear of it through the channel and fail the job, naming it.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from . import state as st
from .channel import Channel, listen

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)
_POLL_S = 0.05


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the supervisor dies, so killing it never orphans the child."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def supervise(rank: int, size: int, shared: st.SharedState, on_end=None) -> None:
    """Fork. Returns in the child only; the parent supervises and exits with the child's code
    (128 + the signal that killed it, as a shell reports it). `on_end(code, sig)` runs in the
    parent when the child ended (spmd.run records it in paddle-launch's status file)."""
    listener = listen() if rank == 0 and size > 1 else None
    if listener is not None:
        shared.slots[st.LISTEN_PORT] = listener.getsockname()[1]
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        if listener is not None:
            listener.close()
        _die_with_parent()
        if os.getppid() != parent:  # the supervisor died before PDEATHSIG was armed
            os._exit(1)
        return
    _Parent(rank, size, shared, child, listener, on_end).run()


class _Parent:
    def __init__(self, rank, size, shared, child, listener, on_end):
        self.rank, self.size, self.shared, self.child = rank, size, shared, child
        self.on_end = on_end
        self.channel = Channel(rank, size, listener, self._departed) if size > 1 else None
        self.left = False
        for sig in FORWARDED:
            signal.signal(sig, self._forward)
        # Hydra tells surviving ranks of a failure with SIGUSR1 when it leaves cleanup to the
        # launcher; the default would kill the supervisor before the launcher asks anything
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)

    def _forward(self, signum, frame):
        try:
            os.kill(self.child, signum)
        except ProcessLookupError:
            pass

    def _departed(self, info: dict) -> None:
        self.shared.record_departure(info["rank"], info["code"], info["signal"],
                                     info["collectives"], info["steps"], info["how"])

    def _progress(self) -> tuple[int, int]:
        s = self.shared.slots
        return int(s[st.COLLECTIVES]), int(s[st.STEPS])

    def _leave(self, code: int, sig: int, how: int) -> None:
        if self.left or self.channel is None:
            return
        self.left = True
        collectives, steps = self._progress()
        self.channel.leave({"code": code, "signal": sig, "collectives": collectives,
                            "steps": steps, "how": how})

    def _tend_channel(self) -> None:
        s, channel = self.shared.slots, self.channel
        if channel is None:
            return
        if self.rank != 0 and not channel.connected and s[st.ADDRESS_READY]:
            if not channel.connect(self.shared.address()):
                s[st.CHANNEL] = -1  # tells the program the channel cannot be made
        if not s[st.CONNECTED] and channel.connected and (
                self.rank != 0 or channel.peers_connected == self.size - 1):
            s[st.CONNECTED] = 1
        channel.poll(_POLL_S)
        if s[st.LEAVING] and not self.left:  # the script ended; the program is finishing
            self._leave(int(s[st.EXIT_CODE]), 0, st.SCRIPT_ENDED)

    def run(self) -> None:
        while True:
            if self.channel is not None:
                self._tend_channel()
            else:
                time.sleep(_POLL_S)
            try:
                pid, status = os.waitpid(self.child, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.child, 0
            if pid:
                break
        code, sig = _decode(status)
        if self.on_end is not None:
            self.on_end(code, sig)
        if sig:  # nothing in the program could say it: the cause, printed once, here
            collectives, steps = self._progress()
            sys.stderr.write(
                f"[rank {self.rank}/{self.size}] the program was killed by signal {sig} "
                f"({_signal_name(sig)}) after collective #{collectives} (step {steps})\n")
        clean = bool(self.shared.slots[st.LEAVING])
        how = st.FAILED if (sig or code) else (st.SCRIPT_ENDED if clean else
                                               st.EXITED_UNCLEANLY)
        self._leave(code, sig, how)
        if (sig or code) or not self._channel_in_use():
            _exit(code, sig)
        # Ended with 0: hold on until every rank has left, or the launcher ends the job.
        while not self.channel.all_done:
            self.channel.poll(0.2)
        _exit(code, sig)

    def _channel_in_use(self) -> bool:
        return self.channel is not None and self.shared.slots[st.CHANNEL] == 1


def _decode(status: int) -> tuple[int, int]:
    if os.WIFSIGNALED(status):
        return 0, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), 0


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown signal"


def _exit(code: int, sig: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + sig if sig else code)
