"""A profiled data-parallel run writes a trace per rank; `spmd.timeline` merges them into one
trace with every rank's ops and collectives (issue, wait, run) on one clock.

The alignment is checked by causality, not by speed: no rank can leave an allreduce before
every rank entered it, so on a correct common clock each allreduce's run starts on every rank
before it ends on any other (give or take the clocks' recorded read uncertainty)."""
from __future__ import annotations

import json
import time

import pytest
from dp_models import batches, build, shard

import spmd.fluid as fluid
import spmd.fluid.profiler as profiler
import spmd.timeline as timeline
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.timeline.__main__ import main as timeline_main

pytestmark = pytest.mark.mpi(min_size=1)
STEPS = 3
SLACK_US = 1000.0  # beyond the recorded uncertainty of the clock reads: rounding, nothing else


def profiled_run(prefix: str, places: int) -> None:
    t = detect()
    main, startup, loss = build("mlp", "sgd", "float32")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.fuse_all_reduce_ops = False  # one allreduce per gradient, overlapping backward
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    data = batches("float32", STEPS + 1)

    def step(x, y):
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                fetch_list=[loss], scope=scope)

    step(*data[0])  # the first run also broadcasts rank 0's parameters: not profiled
    # the ranks start profiling at different times, so their traces' own zeros differ and only
    # a real common clock lines their collectives up
    time.sleep(0.1 * t.rank)
    with profiler.profiler("CPU", "total", prefix):
        for x, y in data[1:]:
            step(x, y)


def by_rank(events, cat):
    found: dict[int, list] = {}
    for e in events:
        if e.get("cat") == cat:
            found.setdefault(e["pid"], []).append(e)
    return found


@pytest.mark.parametrize("places", [1, 2])
def test_merged_timeline_has_every_rank_on_one_clock(mpi_tmp_path, places, capsys):
    t = detect()
    prefix = str(mpi_tmp_path / f"profile_{places}")
    profiled_run(prefix, places)
    MPICommunicator().barrier()  # every rank's trace is written
    capsys.readouterr()
    merged = timeline.merge([prefix])
    events = merged["traceEvents"]
    about = merged["otherData"]["spmd_timeline"]
    assert about["merged"] == list(range(t.size)) and about["notes"] == []

    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert names == {(r, f"rank {r}") for r in range(t.size)}
    tracks = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    ops = by_rank(events, "op")
    runs = by_rank(events, "run")
    for r in range(t.size):
        assert {"mul", "mul_grad", "sgd"} <= {e["name"] for e in ops[r]}
        assert len(runs[r]) == STEPS * places  # ParallelExecutor::Run per place thread
        assert (r, "ops" if places == 1 else "ops (thread 1)") in tracks
    assert min(e["ts"] for e in events if e["ph"] == "X") == 0.0

    issued, waited, ran = (by_rank(events, f"comm {k}") for k in ("issue", "wait", "run"))
    if t.size * places == 1:
        assert not issued and not waited and not ran  # one place: nothing to communicate
        return
    for r in range(t.size):
        for kind, found in (("issue", issued), ("wait", waited), ("run", ran)):
            assert "allreduce" in {e["name"] for e in found[r]}, (r, kind)
        mine = [name for rank, name in tracks if rank == r]
        for kind in ("comm issue", "comm wait", "comm run"):
            assert any(name.startswith(kind) for name in mine), (kind, mine)
    if t.size > 1:
        check_collectives_are_causal(ran, t.size, about["clock_uncertainty_us"])


def check_collectives_are_causal(ran, size, uncertainty_us):
    """Matched allreduces (same place, same order on every rank): each starts on every rank
    before it ends on any, within the clock reads' uncertainty."""
    series = {}
    for r in range(size):
        for e in sorted(ran[r], key=lambda e: e["ts"]):
            if e["name"] == "allreduce" and e["args"]["processes"] == size:
                series.setdefault((r, e["args"]["member"]), []).append(e)
    members = {m for _, m in series}
    tol = SLACK_US + 2 * uncertainty_us
    for m in members:
        runs = [series[(r, m)] for r in range(size)]
        assert len({len(s) for s in runs}) == 1, [len(s) for s in runs]
        # a rank's clock set late shows as a late start, one set early as an early end:
        # either way this fails, so no bound on durations is needed as well
        for k in range(len(runs[0])):
            starts = [s[k]["ts"] for s in runs]
            ends = [s[k]["ts"] + s[k]["dur"] for s in runs]
            assert max(starts) <= min(ends) + tol, (m, k, starts, ends)


def test_merge_command_writes_one_trace(mpi_tmp_path, capsys):
    t = detect()
    prefix = str(mpi_tmp_path / "cli_profile")
    profiled_run(prefix, 1)
    comm = MPICommunicator()
    comm.barrier()
    capsys.readouterr()
    if t.rank == 0:
        out = mpi_tmp_path / "timeline.json"
        assert timeline_main(["merge", "--out", str(out), prefix]) == 0
        assert f"wrote {out}: {t.size} of {t.size} rank(s)" in capsys.readouterr().out
        merged = json.loads(out.read_text())
        assert {e["pid"] for e in merged["traceEvents"]} == set(range(t.size))
    comm.barrier()  # the others stay until rank 0 has read the files
