"""The examples under each launcher, checking every rank's log: the digits example under
`paddle-launch --nproc_per_node 2` and `mpirun -n 4` (oversubscribed on 2 cores), and the
SLURM example's training script under paddle-launch."""
from __future__ import annotations

import re

from launch_helpers import MPIEXEC, PYTHON, launcher, run

from spmd.status_file import read_status

EPOCHS = 3


def _check_digits_rank0(text: str, nprocs: int) -> None:
    losses = [float(v) for v in re.findall(r"^epoch +\d+ +loss ([0-9.]+)$", text, re.M)]
    assert len(losses) == EPOCHS and losses[-1] < losses[0], text
    assert re.search(rf"^test accuracy [0-9.]+  \({nprocs} ranks\)$", text, re.M), text


def _check_quiet_rank(text: str) -> None:
    """Ranks other than 0 print nothing but may not fail."""
    assert "Traceback" not in text and "Error" not in text, text


def test_digits_under_paddle_launch(tmp_path, token):
    log_dir = tmp_path / "log"
    res = run(launcher("--nproc_per_node", "2", "--log_dir", str(log_dir),
                       "examples/digits/train.py", "--epochs", str(EPOCHS)), token, timeout=240)
    assert res.returncode == 0, res.output[-4000:]
    _check_digits_rank0(res.stdout, 2)  # rank 0's output reaches the console
    _check_digits_rank0((log_dir / "workerlog.0").read_text(), 2)
    _check_quiet_rank((log_dir / "workerlog.1").read_text())
    for rank in range(2):
        status = read_status(str(log_dir / f"workerstatus.{rank}"))
        assert status.exit_code == 0 and status.error is None, status


def test_digits_under_mpirun_4_ranks(tmp_path, token):
    # `mpirun -n 4 python train.py`, no launcher; Hydra writes each rank's output to its file.
    res = run([MPIEXEC, "-n", "4", "-outfile-pattern", f"{tmp_path}/rank.%r.out",
               "-errfile-pattern", f"{tmp_path}/rank.%r.err", PYTHON,
               "examples/digits/train.py", "--epochs", str(EPOCHS)], token, timeout=240)
    assert res.returncode == 0, res.output[-4000:]
    _check_digits_rank0((tmp_path / "rank.0.out").read_text(), 4)
    for rank in range(4):
        for kind in ("out", "err"):
            path = tmp_path / f"rank.{rank}.{kind}"
            if path.exists() and (rank, kind) != (0, "out"):
                _check_quiet_rank(path.read_text())


def test_slurm_example_script_under_paddle_launch(tmp_path, token):
    log_dir = tmp_path / "log"
    res = run(launcher("--nproc_per_node", "2", "--log_dir", str(log_dir),
                       "examples/slurm/train.py", "--steps", "5"), token, timeout=120)
    assert res.returncode == 0, res.output[-4000:]
    for rank in range(2):
        text = (log_dir / f"workerlog.{rank}").read_text()
        first, last = map(float, re.search(rf"rank {rank}/2 trained: loss ([0-9.]+) -> "
                                           rf"([0-9.]+)", text).groups())
        assert last < first, text
