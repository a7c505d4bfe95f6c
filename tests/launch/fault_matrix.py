"""The fault matrix: a fluid data-parallel job (scripts/faults.py) in which one rank misbehaves,
under each launcher (and as env-only trainers: plain processes with fluid's PADDLE_* variables
only, scripts/plain_trainers.py), at 2 and 3 ranks. Every case must end within its bound, with
a non-zero exit code (0 for `ok`), the misbehaving rank and the cause named in the output, and
no process left behind. Each fault that ends or stalls a rank comes at step 2 and, as
`<fault>_before_mpi`, before MPI starts (before the job's first collective); each that ends
a rank also as `<fault>_in_mpi_start`, while spmd's MPI_Init runs (the job's first MPI use):
those run with the default collective timeout (1800 s) under a bound of IN_START_BOUND_S, and
every other rank must say which rank stopped it and how it ended (under paddle-launch, its
report names the root cause).

    python tests/launch/fault_matrix.py               # the whole matrix, as a table
    python tests/launch/fault_matrix.py --launchers mpiexec --ranks 2 --faults os_exit0 hang

test_fault_matrix.py runs a representative share of it in CI (the whole matrix with
SPMD_FAULT_MATRIX=all). srun cases need SLURM (Debian's slurmctld, slurmd, munge) and root:
the matrix starts a one-node cluster for them, or leaves them out, saying why.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from launch_helpers import MPIEXEC, PYTHON, SCRIPTS, launcher, processes_with, run  # noqa: E402

FAULTS_SCRIPT = str(SCRIPTS / "faults.py")
LAUNCHERS = ("mpiexec", "spmd.run", "paddle-launch", "srun", "env-only")
PLAIN_TRAINERS = str(SCRIPTS / "plain_trainers.py")  # env-only: PADDLE_* only, no launcher
RANKS = (2, 3)
COLLECTIVE_TIMEOUT_S = 10  # the hang case ends by it
JOIN_TIMEOUT_S = 30  # env-only trainers' start-up skew on a loaded machine stays under it
BOUND_S = 90  # no case may run longer (a hang fails the case, never the suite)

# fault -> what the output must say ({bad}: the misbehaving rank)
EXPECTED = {
    "ok": r"rank 0/\d+ done",
    "raise": r"ZeroDivisionError: rank {bad} failed on purpose",
    "sigkill": r"rank {bad}\b.*(signal 9|SIGKILL)",
    "sigterm": r"rank {bad}\b.*(signal 15|SIGTERM)",
    "exit3": r"rank {bad}\b.*(left the job|exit code 3)",
    "exit0": r"rank {bad} left the job",
    "os_exit0": r"rank {bad} left the job",
    "hang": r"did not complete within {timeout} s",
    "extra_step": r"rank \d+ left the job .* while this rank waits",
    "differ": r"different program",
    "nan_feed": r"(NaN|Inf)",
    "empty_feed": r"(empty|0 rows)",
    "raise_own_mpi": r"ZeroDivisionError: rank {bad} failed on purpose",
    "os_exit0_own_mpi": r"rank {bad}\b.*os\._exit\(0\)",
    "kill_in_save": r"rank {bad}\b.*(signal 9|SIGKILL)",
    "bad_checkpoint": r"cannot load variable 'fc_0\.w_0' from '[^']+': it is not a \.npy file",
}
BEFORE_MPI = "_before_mpi"  # the same fault before MPI starts, before the job's first collective
EARLY_FAULTS = ("raise", "sigkill", "sigterm", "exit3", "exit0", "os_exit0", "hang")
# what the output says where it differs when the fault comes before MPI starts
EXPECTED_BEFORE_MPI = {
    "exit0": r"rank {bad}/\d+\] FAILED before the job's first collective.*exit code 0",
    "os_exit0": r"rank {bad}/\d+\] FAILED before the job's first collective.*exit code 0",
    "hang": r"((MPI start-up|the job's start).* did not complete within {timeout} s|never "
            r"reached trainer 0's join point .* within {join_timeout} s)",
}
EXPECTED.update({fault + BEFORE_MPI: EXPECTED_BEFORE_MPI.get(fault, EXPECTED[fault])
                 for fault in EARLY_FAULTS})
IN_MPI_START = "_in_mpi_start"  # the fault while the job's MPI start-up runs (faults.py --step -2)
IN_START_FAULTS = ("raise", "sigkill", "exit3", "exit0", "os_exit0")
IN_START_BOUND_S = 60  # far below the collective timeout these cases keep (1800 s)
# the misbehaving rank's own block, and how the others name its end
_IN_START_CAUSE = {"raise": r"ZeroDivisionError: rank {bad} failed on purpose",
                   "sigkill": r"killed by signal 9 \(SIGKILL\)", "exit3": r"exit code 3",
                   "exit0": r"exit code 0", "os_exit0": r"exit code 0"}
EXPECTED.update({fault + IN_MPI_START: (
    r"rank {bad}/\d+\] FAILED[^\n]*" + _IN_START_CAUSE[fault] if fault != "raise" else
    _IN_START_CAUSE[fault]) for fault in IN_START_FAULTS})
FAULTS = tuple(EXPECTED)
ENV = {"SPMD_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT_S), "FLAGS_check_nan_inf": "1",
       "SPMD_JOIN_TIMEOUT": str(JOIN_TIMEOUT_S)}


def applies(launcher_name: str, fault: str) -> bool:
    """Whether the case is part of the matrix. Env-only trainers' start is the join at
    trainer 0's join point (spmd/comm/join.py), each trainer under its own mpiexec: a death
    in its MPI start-up is not told there (docs/faults.md), so those cases are not run."""
    return not (launcher_name == "env-only" and fault.endswith(IN_MPI_START))


@dataclass
class Outcome:
    launcher: str
    ranks: int
    fault: str
    passed: bool
    returncode: int | None
    seconds: float
    why: str


def command(launcher_name: str, ranks: int, fault: str, bad: int, token: str,
            log_dir: str) -> list[str]:
    early = fault.endswith(BEFORE_MPI)
    in_start = fault.endswith(IN_MPI_START)
    name = fault[:-len(BEFORE_MPI)] if early else fault[:-len(IN_MPI_START)] if in_start else \
        fault
    script = [FAULTS_SCRIPT, "--fault", name,
              "--rank", str(bad), "--token", token, "--ckpt", str(pathlib.Path(log_dir) / "ckpt"),
              *(["--step", "-1"] if early else ["--step", "-2"] if in_start else [])]
    if launcher_name == "mpiexec":
        return [MPIEXEC, "-n", str(ranks), PYTHON, *script]
    if launcher_name == "spmd.run":
        return [MPIEXEC, "-n", str(ranks), PYTHON, "-m", "spmd.run", *script]
    if launcher_name == "paddle-launch":
        return launcher("--nproc_per_node", str(ranks), "--log_dir", log_dir, *script)
    if launcher_name == "env-only":  # one plain process per trainer, fluid's variables only
        return [PYTHON, PLAIN_TRAINERS, str(ranks), *script]
    if launcher_name == "srun":  # no -K: spmd's own supervisors must end the step
        # -O: more tasks than the node has CPUs (oversubscribed, as mpiexec -n 3 is here)
        return ["srun", "-O", "--mpi=pmi2", "-n", str(ranks), PYTHON, *script]
    raise ValueError(f"unknown launcher {launcher_name!r}; one of {LAUNCHERS}")


def run_case(launcher_name: str, ranks: int, fault: str, extra_env: dict | None = None,
             token: str | None = None) -> Outcome:
    """One case; `token` (default: a fresh one) marks its processes."""
    token = token or uuid.uuid4().hex
    bad = ranks - 1
    in_start = fault.endswith(IN_MPI_START)
    bound = IN_START_BOUND_S if in_start else BOUND_S
    env = dict(ENV, SPMD_COLLECTIVE_TIMEOUT="1800") if in_start else ENV
    with tempfile.TemporaryDirectory(prefix="fault-") as log_dir:
        cmd = command(launcher_name, ranks, fault, bad, token, log_dir)
        try:
            res = run(cmd, token, timeout=bound, **env, **(extra_env or {}))
        except AssertionError as e:  # still running at the bound
            return Outcome(launcher_name, ranks, fault, False, None, bound,
                           f"still running after {bound} s: {str(e)[-300:]}")
        logs = "".join(p.read_text(errors="replace")
                       for p in sorted(pathlib.Path(log_dir).glob("workerlog.*")))
        incomplete = _checkpoint_problem(pathlib.Path(log_dir) / "ckpt") \
            if fault == "kill_in_save" else None
    text = res.output + logs
    pattern = EXPECTED[fault]
    if launcher_name == "env-only" and fault.endswith("_own_mpi"):
        # an env-only trainer's own MPI.COMM_WORLD holds only itself (docs/env_only_start.md):
        # its own collective completes alone, and spmd's next one names the rank that left
        pattern = r"rank {bad} left the job"
    pattern = pattern.format(bad=bad, timeout=COLLECTIVE_TIMEOUT_S, join_timeout=JOIN_TIMEOUT_S)
    problems = []
    if (res.returncode == 0) != (fault == "ok"):
        problems.append(f"exit code {res.returncode}")
    if not re.search(pattern, text):
        problems.append(f"output lacks /{pattern}/")
    if in_start:
        problems += _survivors_unsaid(launcher_name, ranks, bad, fault, text)
    if incomplete:
        problems.append(incomplete)
    if "plain_trainers: stopping" in text and not fault.startswith("hang"):
        problems.append("a trainer outlived the failure: its stand-in launcher had to stop it")
    deadline = time.monotonic() + 5  # the process manager may still be reaping
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with(token)
    if left:
        problems.append(f"{len(left)} process(es) left behind")
    why = "; ".join(problems) or "ok"
    if problems:
        why += "\n" + text[-1500:]
    return Outcome(launcher_name, ranks, fault, not problems, res.returncode, res.seconds, why)


def _survivors_unsaid(launcher_name: str, ranks: int, bad: int, fault: str, text: str) -> list:
    """A fault in the job's MPI start-up: every other rank names the rank and how it ended
    (under paddle-launch the launcher's report does, as the root cause)."""
    how = _IN_START_CAUSE[fault[:-len(IN_MPI_START)]].format(bad=bad)
    if launcher_name == "paddle-launch":
        pattern = rf"rank {bad} on \S+: \[root cause\]"
        return [] if re.search(pattern, text) else [f"output lacks /{pattern}/"]
    missing = []
    for r in range(ranks):
        pattern = (rf"\[rank {r}/{ranks}\] stopped: rank {bad} ended in the job's MPI "
                   rf"start-up[^\n]*{how}")
        if r != bad and not re.search(pattern, text):
            missing.append(f"output lacks /{pattern}/")
    return missing


def _checkpoint_problem(directory: pathlib.Path) -> str | None:
    """After a save killed midway: the checkpoint must load, whole (the old or the new)."""
    sys.path.insert(0, str(SCRIPTS))
    import faults

    import spmd.fluid as fluid

    with fluid.unique_name.guard():  # the names the job's program had
        program = faults.build(32)[0]
    try:
        with fluid.scope_guard(fluid.Scope()):
            fluid.io.load_persistables(fluid.Executor(fluid.CPUPlace()), str(directory), program)
    except Exception as e:  # noqa: BLE001 - reported as the case's failure
        return f"the checkpoint does not load after the kill: {e}"
    return None


def table(outcomes: list[Outcome]) -> str:
    lines = ["| launcher | ranks | fault | outcome | exit code | seconds |",
             "|---|---|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {o.launcher} | {o.ranks} | {o.fault} | "
                     f"{'pass' if o.passed else 'FAIL: ' + o.why.splitlines()[0]} | "
                     f"{o.returncode} | {o.seconds:.1f} |")
    passed = sum(o.passed for o in outcomes)
    lines.append(f"\n{passed} of {len(outcomes)} cases pass")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launchers", nargs="+", default=list(LAUNCHERS), choices=LAUNCHERS)
    p.add_argument("--ranks", nargs="+", type=int, default=list(RANKS))
    p.add_argument("--faults", nargs="+", default=list(FAULTS), choices=FAULTS)
    args = p.parse_args(argv)
    outcomes = []
    launchers = list(args.launchers)
    slurm_env = None
    with _maybe_slurm("srun" in launchers) as cluster:
        if "srun" in launchers and cluster is None:
            launchers.remove("srun")
        elif cluster is not None:
            slurm_env = cluster.env
        for name in launchers:
            for ranks in args.ranks:
                for fault in filter(lambda f: applies(name, f), args.faults):
                    outcome = run_case(name, ranks, fault, slurm_env if name == "srun" else None)
                    print(f"{name:13} {ranks} {fault:11} "
                          f"{'pass' if outcome.passed else 'FAIL'} ({outcome.seconds:.1f} s)",
                          file=sys.stderr, flush=True)
                    outcomes.append(outcome)
    print(table(outcomes))
    for o in outcomes:
        if not o.passed:
            print(f"\n--- {o.launcher} {o.ranks} {o.fault}: {o.why}")
    return 0 if all(o.passed for o in outcomes) else 1


class _maybe_slurm:
    """A one-node SLURM cluster while the matrix runs, when asked for and possible."""

    def __init__(self, wanted: bool):
        self._wanted, self._cm, self._dir = wanted, None, None

    def __enter__(self):
        if not self._wanted:
            return None
        from slurm_cluster import skip_reason, slurm_cluster

        reason = skip_reason()
        if reason:
            print(f"srun cases left out: {reason}", file=sys.stderr)
            return None
        self._dir = tempfile.TemporaryDirectory(prefix="slurm-")
        self._cm = slurm_cluster(pathlib.Path(self._dir.name))
        return self._cm.__enter__()

    def __exit__(self, *exc):
        if self._cm is not None:
            self._cm.__exit__(*exc)
            self._dir.cleanup()
        return False


if __name__ == "__main__":
    sys.exit(main())
