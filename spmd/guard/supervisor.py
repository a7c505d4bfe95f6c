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

# the channel (sockets) and the early news (json) are imported where they are used: on rank 0
# before the fork, for its listener; elsewhere in the supervisor only, after it. The program
# (the child) then starts without them: every module imported before the fork is a cost of
# the program's start-up too

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)
_POLL_S = 0.05
_STOP_GRACE_S = 5.0
_TELL_S = 1.0  # telling the node's other supervisors of a death in MPI start-up, at most
_HEARD_S = 1.0  # then for them to print their line, before the job is ended


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the supervisor dies, so killing it never orphans the child."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def supervise(rank: int, size: int, shared: st.SharedState, on_end=None,
              launcher_stops_ranks: bool = False) -> None:
    """Fork. Returns in the child only; the parent supervises and exits with the child's code
    (128 + the signal that killed it, as a shell reports it). `on_end(code, sig, error)` runs
    in the parent just before it exits (spmd.run records it in paddle-launch's status file).
    `launcher_stops_ranks`: after a peer failed, leave stopping this rank to the launcher
    (paddle-launch asks where each rank was first); otherwise the supervisor stops it, so a
    launcher that does not (srun without -K) still ends the job."""
    listener = None
    if rank == 0 and size > 1:
        from .channel import NodeAddressUnknown, listen

        try:
            listener = listen()
        except NodeAddressUnknown:
            pass  # LISTEN_PORT stays 0: the job's first MPI use fails, saying what to set
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
    _Parent(rank, size, shared, child, listener, on_end, launcher_stops_ranks).run()


class _Parent:
    def __init__(self, rank, size, shared, child, listener, on_end, launcher_stops_ranks):
        self.rank, self.size, self.shared, self.child = rank, size, shared, child
        self.on_end, self.launcher_stops_ranks = on_end, launcher_stops_ranks
        self.tag = f"[rank {rank}/{size}]"
        # imported now, while the program starts (in parallel): not at the first MPI use,
        # where every rank waits for the supervisors' hellos (hmac, hashlib: job_token.hello)
        import hashlib  # noqa: F401
        import hmac  # noqa: F401

        from .channel import Channel
        from .early_news import EarlyNews

        self.channel = Channel(rank, size, listener, self._departed) if size > 1 else None
        # before the channel is up: news of a rank that died in MPI start-up (early_news.py)
        self.early = EarlyNews(rank, size) if size > 1 else None
        self.end_job_why = ""  # set: this supervisor ends the job by its own SIGKILL (Hydra)
        self.left = False
        self.stop_at: float | None = None  # when to stop the program after a peer failed
        self.stop_reason = ""
        self.terms_sent = 0
        self.stopped_from_outside = False
        for sig in FORWARDED:
            signal.signal(sig, self._forward)
        # Hydra tells surviving ranks of a failure with SIGUSR1 when it leaves cleanup to the
        # launcher; the default would kill the supervisor before the launcher asks anything
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)

    def _forward(self, signum, frame):
        if frame is not None:  # from outside (the launcher stops the job), not our own stop
            self.stopped_from_outside = True
        try:
            os.kill(self.child, signum)
        except ProcessLookupError:
            pass

    def _departed(self, info: dict) -> None:
        self.shared.record_departure(info["rank"], info["code"], info["signal"],
                                     info["collectives"], info["steps"], info["how"])
        if info["how"] == st.FAILED:
            self.shared.record_failure(info["rank"], info["collectives"], info["code"],
                                       info["signal"])
        if info.get("aborting"):
            self._say_stopped_by_abort(info)
        failed = info["how"] in (st.FAILED, st.LOST)
        if failed and not self.launcher_stops_ranks and self.stop_at is None:
            # the program may be failing already, with a better message: give it a moment
            self.stop_at = time.monotonic() + _STOP_GRACE_S
            ended = (f"signal {info['signal']}" if info["signal"] else
                     f"exit code {info['code']}" if info["code"] >= 0 else "its process lost")
            self.stop_reason = f"rank {info['rank']} failed ({ended})"

    def _say_stopped_by_abort(self, info: dict) -> None:
        """A peer is about to MPI_Abort the job, which kills this rank too, before it can say
        anything: its line now, unless the program is reporting an error of its own (it then
        says it was stopped) or paddle-launch stops the ranks (its report says it)."""
        s = self.shared.slots
        if self.launcher_stops_ranks or s[st.FAILING] or s[st.STOP_SAID] or self.left:
            return
        s[st.STOP_SAID] = 1
        sys.stderr.write(f"{self.tag} stopped: rank {info['rank']} failed first (exit code "
                         f"{info['code']}, after its collective #{info['collectives']}); it "
                         f"ends the job (MPI_Abort)\n")
        sys.stderr.flush()

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

    def _tell_abort(self) -> None:
        """The program fails and is about to MPI_Abort the job: the others hear it first.
        Not a departure yet (the abort ends every rank; a rank still holding its exit must
        not take it for the job's end and exit 0 before the abort's code is the job's)."""
        s = self.shared.slots
        if self.channel is not None and not self.left:
            collectives, steps = self._progress()
            self.channel.leave({"code": int(s[st.ABORT_CODE]), "signal": 0,
                                "collectives": collectives, "steps": steps, "how": st.FAILED,
                                "aborting": 1})
        s[st.ABORT_TOLD] = 1

    def _heard_early(self) -> None:
        """A peer died in the job's MPI start-up (its supervisor told this node's, as the
        channel is not up yet): this rank's line now, and this rank stops (in its MPI
        start-up wait, or by the supervisor after the grace)."""
        if self.early is None or self.shared.slots[st.CONNECTED]:
            return
        for news in self.early.poll():
            if self.shared.slots[st.DEPARTED]:
                continue
            from .stand_in import cause

            self._departed({"rank": news["rank"], "code": news["code"],
                            "signal": news["signal"], "collectives": 0, "steps": 0,
                            "how": st.FAILED})
            s = self.shared.slots
            if self.launcher_stops_ranks or s[st.STOP_SAID]:
                continue  # paddle-launch's report names the rank and its cause
            s[st.STOP_SAID] = 1
            sys.stderr.write(f"{self.tag} stopped: rank {news['rank']} ended in the job's MPI "
                             f"start-up, before its first collective: "
                             f"{cause(news['code'], news['signal'], news['error'])}; the job "
                             f"ends\n")
            sys.stderr.flush()

    def _tend_channel(self) -> None:
        s, channel = self.shared.slots, self.channel
        if channel is None:
            time.sleep(_POLL_S)
            return
        self._heard_early()
        # a rank other than 0 has nothing to hear before it joins: it waits for the address,
        # woken as soon as the program sets it (the job's first collective waits for this)
        waiting = self.rank != 0 and not channel.connected and s[st.CHANNEL] == 0 and \
            not s[st.ADDRESS_READY]
        if waiting:
            self.shared.wait_for_address(_POLL_S)
        if self.rank != 0 and not channel.connected and s[st.ADDRESS_READY]:
            if not channel.connect(self.shared.address()):
                s[st.CHANNEL] = -1  # tells the program the channel cannot be made
        if not s[st.CONNECTED] and channel.connected and (
                self.rank != 0 or channel.peers_connected == self.size - 1):
            s[st.CONNECTED] = 1
        if not waiting:
            channel.poll(_POLL_S)
        if s[st.ABORTING] and not s[st.ABORT_TOLD]:
            self._tell_abort()
        if s[st.LEAVING] and not self.left:  # the script ended; the program is finishing
            self._leave(int(s[st.EXIT_CODE]), 0, st.SCRIPT_ENDED)

    def _stop_program_if_due(self) -> None:
        if self.stop_at is None or time.monotonic() < self.stop_at:
            return
        sys.stderr.write(f"{self.tag} stopping this rank: {self.stop_reason} and this rank "
                         f"was still running {_STOP_GRACE_S:g} s later\n")
        sys.stderr.flush()
        self._forward(signal.SIGKILL if self.terms_sent else signal.SIGTERM, None)
        self.terms_sent += 1
        self.stop_at = time.monotonic() + 3.0  # then SIGKILL, should SIGTERM not do

    def run(self) -> None:
        while True:
            self._tend_channel()
            self._stop_program_if_due()
            try:
                pid, status = os.waitpid(self.child, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.child, 0
            if pid:
                break
        code, sig = _decode(status)
        if self._ended_before_mpi():
            self._exit(self._stand_in(code, sig), 0)
        if self._ended_in_mpi_start():
            self._exit(*self._tell_died_in_start(code, sig))
        if sig:  # nothing in the program could say it: the cause, printed once, here
            collectives, steps = self._progress()
            first = self.shared.earliest_failure()
            if first is not None and first["rank"] != self.rank:
                ended = (f"signal {first['signal']}" if first["signal"] else
                         f"exit code {first['code']}")
                sys.stderr.write(f"{self.tag} stopped (signal {sig}, {_signal_name(sig)}): "
                                 f"rank {first['rank']} failed first ({ended})\n")
            else:
                sys.stderr.write(
                    f"{self.tag} the program was killed by signal {sig} ({_signal_name(sig)}) "
                    f"after collective #{collectives} (in its Executor.run #{steps})\n")
        clean = bool(self.shared.slots[st.LEAVING])
        how = st.FAILED if (sig or code) else (st.SCRIPT_ENDED if clean else
                                               st.EXITED_UNCLEANLY)
        self._leave(code, sig, how)
        if (sig or code) or not self._channel_in_use():
            self._exit(code, sig)
        self._hold_until_all_done(clean)
        self._exit(code, sig)

    def _ended_before_mpi(self) -> bool:
        """The program ended before it began to start MPI, in a job of several ranks: the
        others would wait for it in MPI start-up."""
        s = self.shared.slots
        return self.channel is not None and s[st.CHANNEL] == 0 and not s[st.MPI_STARTED] \
            and not self.stopped_from_outside  # a job being stopped needs no stand-in

    def _ended_in_mpi_start(self) -> bool:
        """The program ended in the job's MPI start-up (spmd's first MPI use, before the
        channel was decided), not because a peer's death stopped it: the others wait for it
        there. No stand-in can take its place (it already spoke on the PMI connection)."""
        s = self.shared.slots
        return self.early is not None and s[st.CHANNEL] == 0 and bool(s[st.STARTING]) and \
            not s[st.DEPARTED] and not s[st.MPI_START_FAILED] and not self.stopped_from_outside

    def _tell_died_in_start(self, code: int, sig: int) -> tuple[int, int]:
        """Say why, tell the node's other supervisors (they print their line and stop
        their rank), then end the job: Hydra ends a job one of whose processes is killed,
        whatever the others wait in. Under paddle-launch the launcher stops the others and
        reports. The (code, signal) to exit with."""
        from .stand_in import block, say

        s = self.shared.slots
        error = self.shared.error() if s[st.FAILING] else ""
        if not error:  # a signal, an exit: the program could not say it
            say(block(self.tag, code, sig, "", in_start=True))
        record = {"rank": self.rank, "size": self.size, "code": code, "signal": sig,
                  "error": error}
        others = set(range(self.size)) - {self.rank}
        reached: set = set()
        deadline = time.monotonic() + _TELL_S
        while others - reached and time.monotonic() < deadline:
            reached |= self.early.tell(record, others - reached)
            time.sleep(0.1)
        if reached:
            time.sleep(_HEARD_S)
        code = code or (0 if sig else 1)  # an exit 0 in start-up is a failure of the job
        if not self.launcher_stops_ranks:
            self.end_job_why = "its program died in the job's MPI start-up"
        return code, sig

    def _stand_in(self, code: int, sig: int) -> int:
        from ..comm.join_mark import joined_start
        from ..flags import flags
        from .stand_in import stand_in

        settings = flags()
        joined = joined_start()
        timeout = settings.join_timeout_s if joined else settings.collective_timeout_s
        record = None
        if self.on_end is not None:  # paddle-launch's status file: said before any abort
            def record(text: str) -> None:
                self.on_end(code or 1, sig, text)

        return stand_in(self.rank, self.size, code, sig, self.shared.error(), timeout, joined,
                        record)

    def _hold_until_all_done(self, clean: bool) -> None:
        """The program ended with 0: hold on until every rank has left, or the launcher ends
        the job. After os._exit the peers may wait in the program's own MPI calls, where
        nothing tells them: the wait is then bounded by the collective timeout, as every
        collective of spmd's, and the job fails."""
        from ..flags import flags

        timeout = flags().collective_timeout_s
        limit = None if clean else time.monotonic() + timeout
        while not self.channel.all_done:
            self.channel.poll(0.2)
            if limit is not None and time.monotonic() > limit:
                error = (f"{self.tag} the program ended with os._exit(0) (or exit(0) from C "
                         f"code) and the other ranks did not end within "
                         f"SPMD_COLLECTIVE_TIMEOUT={timeout:g} s after it; failing the job "
                         f"rather than reporting success")
                sys.stderr.write(error + "\n")
                collectives, steps = self._progress()
                self.channel.leave({"code": 1, "signal": 0, "collectives": collectives,
                                    "steps": steps, "how": st.FAILED})
                self._exit(1, 0, error)

    def _channel_in_use(self) -> bool:
        return self.channel is not None and self.shared.slots[st.CHANNEL] == 1

    def _exit(self, code: int, sig: int, error: str | None = None) -> None:
        if self.on_end is not None:
            self.on_end(code, sig, error)
        sys.stdout.flush()
        sys.stderr.flush()
        s = self.shared.slots
        if (s[st.MPI_START_FAILED] or self.end_job_why) and self.size > 1:
            # a peer hangs before MPI (or died in it): the process manager waits for it,
            # whatever code this exits with, but ends the whole job when one of its processes
            # is killed (Hydra)
            if not s[st.DEPARTED]:  # else this rank said already which peer stopped it
                why = self.end_job_why or "MPI start-up timed out"
                sys.stderr.write(f"{self.tag} ending the job: {why}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        _end_process(128 + sig if sig else code)


def _end_process(status: int) -> None:
    """Exit now with `status`. A supervisor that started and finalized MPI in its program's
    place (spmd/guard/stand_in.py) exits through the C library's exit: MPICH tells its process
    manager that it finalized (PMI's `finalize`) only in a C exit handler, which os._exit
    skips, and Hydra takes a process that closes its PMI connection without it for a crash:
    it SIGKILLs the ranks still running and ends the job with 9 (BAD TERMINATION), although
    every rank ended well. Whether any was still running was a race (seen with 3 and 4 ranks
    on 2 cores: the stand-ins finalize a few ms apart)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and mpi.Is_finalized():
        import ctypes

        try:
            ctypes.CDLL(None).exit(status)  # C exit handlers (PMI finalize), no Python ones
        except (OSError, AttributeError):
            pass
    os._exit(status)


def _decode(status: int) -> tuple[int, int]:
    if os.WIFSIGNALED(status):
        return 0, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), 0


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown signal"
