"""bench/gpu.py's logic, run on the CPU (`--place cpu`: numpy, torch CPU where importable, MPI
and gloo instead of cupy, CUDA torch and NCCL), tiny sizes; and its skip without cupy. No timing
or ratio is asserted, only that every row is there with finite numbers."""
from __future__ import annotations

import math
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu.py"
TITLES = ("MLP 784-512-512-10", "small CNN", "ResNet-20")


def _cells(text: str, first: str) -> list[list[str]]:
    """The cells of the table rows of `text` whose first cell is `first`."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    return [r for r in rows if r[0] == first]


def _finite_or_dash(cell: str) -> bool:
    return cell == "-" or math.isfinite(float(cell.strip("*")))


def test_cpu_place_prints_every_row(tmp_path):
    out = tmp_path / "gpu.md"
    res = subprocess.run(
        [sys.executable, str(SCRIPT), "--place", "cpu", "--quick", "--batches", "4",
         "--rounds", "1", "--steps", "1", "--warmup", "1", "--dp-ranks", "1",
         "--dp-batch", "4", "--dp-models", "mlp", "--dp-timeout", "120", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    text = out.read_text()
    assert "## Problems" not in text, text
    for title in TITLES:  # one process: model, batch, spmd ms, torch ms, ratio
        (row,) = [r for r in _cells(text, title) if len(r) == 5 and r[1] == "4"]
        assert math.isfinite(float(row[2])), row
        assert all(_finite_or_dash(c) for c in row[3:]), row
    # data parallel: model, batch, spmd, spmd DP, torch, DDP, three ratios
    (dp,) = [r for r in _cells(text, TITLES[0]) if len(r) == 9]
    assert math.isfinite(float(dp[2])) and math.isfinite(float(dp[3])), dp
    assert all(_finite_or_dash(c) for c in dp[4:]), dp
    # the allreduce of the gradient bytes: model, MB, spmd, torch, ratio
    (coll,) = [r for r in _cells(text, TITLES[0]) if len(r) == 5 and "." in r[1]]
    assert math.isfinite(float(coll[1])) and math.isfinite(float(coll[2])), coll


def test_without_cupy_it_skips_with_the_reason():
    # cupy made unimportable whatever is installed; the script then says why and exits 0
    code = ("import runpy, sys; sys.modules['cupy'] = None; sys.argv = [sys.argv[1]]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    res = subprocess.run([sys.executable, "-c", code, str(SCRIPT)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "skipped: cupy is not installed" in res.stdout, res.stdout + res.stderr
    assert "|" not in res.stdout, res.stdout
