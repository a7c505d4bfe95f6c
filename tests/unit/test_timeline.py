"""spmd.timeline: per-rank traces (written by the profiler's own writer from made-up events)
merged onto one clock; the tracks and their names; the hosts' clocks checked against the
collectives; every refusal names the files and the fix; a real profiled one-process run with
two places; the command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.fluid.profiler as fluid_profiler
import spmd.timeline as timeline
from spmd import profiler
from spmd.comm.base import SelfCommunicator
from spmd.errors import InvalidArgumentError
from spmd.timeline.__main__ import main

WALL = 1_700_000_000_000_000_000  # ns: a made-up wall clock time of the job's start
MS = 1_000_000
MPI_INFO = {"comm": "MPICommunicator", "member": 0, "processes": 2, "bytes": 64}


class Engine:
    """Stands for a progress engine: the recorder names a comm run track per engine."""


def write_rank(path, rank, size, *, perf0, skew_ns=0, ops=(), comm=(), host=None, job=None,
               step_ns=0):
    """A trace as rank `rank` writes it. Times are ns of the true clock from the job's start;
    this rank's perf_counter reads perf0 at true 0, and its wall clock is off by `skew_ns`."""
    rec = profiler.Recorder("CPU")
    rec.clock = {"perf_ns": perf0, "wall_ns": WALL + skew_ns, "uncertainty_ns": 40}
    rec.clock_at_stop = {"perf_ns": perf0 + 900 * MS, "uncertainty_ns": 40,
                         "wall_ns": WALL + skew_ns + 900 * MS + step_ns}
    for name, start, end in ops:
        rec.record(name, perf0 + start, perf0 + end, 0)
    engine = Engine()
    for kind, name, start, end in comm:
        rec.record_comm(kind, name, perf0 + start, perf0 + end, dict(MPI_INFO, processes=size),
                        engine)
    profiler.write_chrome_trace(rec, str(path), rank, size)
    if host is not None or job is not None:
        data = json.loads(path.read_text())
        meta = data["otherData"]["spmd"]
        meta["host"] = host if host is not None else meta["host"]
        meta["job"] = job
        path.write_text(json.dumps(data))
    return path


def allreduce_step(t0, wait_until):
    """One step: an op, an allreduce issued, run from t0 to `wait_until`, waited for."""
    ops = [("mul", t0 - 2 * MS, t0 - MS), ("c_allreduce_sum", t0, t0 + 100_000)]
    comm = [("issue", "allreduce", t0, t0 + 100_000), ("run", "allreduce", t0, wait_until),
            ("wait", "allreduce", t0 + 200_000, wait_until + 50_000)]
    return ops, comm


def two_ranks(tmp_path, skew1=0, hosts=(None, None), arrive1=5 * MS):
    """Rank 0 reaches the allreduce at 10 ms, rank 1 at 10 ms + `arrive1`; it ends for both
    at the later arrival plus 0.3 ms. Rank 1's perf_counter counts from a far other zero."""
    end = 10 * MS + max(0, arrive1) + 300_000
    ops0, comm0 = allreduce_step(10 * MS, end)
    ops1, comm1 = allreduce_step(10 * MS + arrive1, end)
    write_rank(tmp_path / "p.rank0", 0, 2, perf0=5_000 * MS, ops=ops0, comm=comm0,
               host=hosts[0])
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=987_654 * MS, skew_ns=skew1, ops=ops1,
               comm=comm1, host=hosts[1])
    return str(tmp_path / "p")


def x_events(merged, pid=None, cat=None):
    return [e for e in merged["traceEvents"] if e["ph"] == "X"
            and (pid is None or e["pid"] == pid) and (cat is None or e["cat"] == cat)]


def test_ranks_land_on_one_clock_from_the_earliest_event(tmp_path):
    merged = timeline.merge([two_ranks(tmp_path)])
    # the earliest event anywhere: rank 0's mul at 8 ms; everything in us from there
    first = {e["pid"]: e for e in x_events(merged) if e["name"] == "mul"}
    assert first[0]["ts"] == 0.0 and first[1]["ts"] == 5000.0
    runs = {e["pid"]: e for e in x_events(merged, cat="comm run")}
    assert runs[0]["ts"] == 2000.0 and runs[1]["ts"] == 7000.0
    assert runs[0]["ts"] + runs[0]["dur"] == pytest.approx(runs[1]["ts"] + runs[1]["dur"])
    about = merged["otherData"]["spmd_timeline"]
    assert about["merged"] == [0, 1] and about["notes"] == []
    assert about["zero_wall_ns"] == WALL + 8 * MS
    assert about["clock_uncertainty_us"] == 0.04


def test_every_rank_is_a_named_process_with_named_tracks(tmp_path):
    merged = timeline.merge([two_ranks(tmp_path)])
    meta = [e for e in merged["traceEvents"] if e["ph"] == "M"]
    names = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "process_name"}
    assert names == {(0, "rank 0"), (1, "rank 1")}
    threads = {}
    order = {}
    for e in meta:
        if e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["name"] == "thread_sort_index":
            order[(e["pid"], e["tid"])] = e["args"]["sort_index"]
    for pid in (0, 1):
        mine = sorted((order[k], threads[k]) for k in threads if k[0] == pid)
        assert [n for _, n in mine] == ["ops", "comm issue", "comm wait",
                                        "comm run (MPICommunicator)"]
        for e in x_events(merged, pid):  # every event on a named track of its rank
            assert (pid, e["tid"]) in threads
            kind = threads[(pid, e["tid"])]
            assert kind.startswith(e["cat"]) or e["cat"] == "op" and kind == "ops"
    wait = x_events(merged, 1, "comm wait")[0]
    assert wait["name"] == "allreduce" and wait["dur"] == 150.0


def test_an_engine_freed_and_another_made_at_its_address_get_their_own_tracks():
    # CPython often hands a new object the freed one's id: the recorder must not merge them
    rec = profiler.Recorder("CPU")
    for member in range(20):
        rec.record_comm("run", "allreduce", 30, 40, dict(MPI_INFO, member=member), Engine())
    assert sorted({track for _, _, track, *_ in rec.comm_events}) == list(range(20))


def test_several_threads_and_engines_get_a_track_each(tmp_path):
    rec = profiler.Recorder("CPU")
    rec.clock = {"perf_ns": 0, "wall_ns": WALL, "uncertainty_ns": 0}
    rec.record("mul", 10, 20, 0)
    rec.record("mul", 10, 20, 1)
    rec.record_comm("run", "allreduce", 30, 40, dict(MPI_INFO, member=0), Engine())
    rec.record_comm("run", "allreduce", 30, 40, dict(MPI_INFO, member=1), Engine())
    profiler.write_chrome_trace(rec, str(tmp_path / "one"), 0, 1)
    merged = timeline.merge([tmp_path / "one"])
    names = {e["args"]["name"] for e in merged["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"ops (thread 0)", "ops (thread 1)",
                     "comm run 0 (MPICommunicator, place 0)",
                     "comm run 1 (MPICommunicator, place 1)"}


def test_a_host_whose_clock_breaks_the_collectives_is_moved(tmp_path):
    # host b's wall clock runs 20 ms ahead: by it rank 1 would leave the allreduce 20 ms
    # after rank 0 did, and enter it after rank 0 had left
    merged = timeline.merge([two_ranks(tmp_path, skew1=20 * MS, hosts=("a", "b"))])
    about = merged["otherData"]["spmd_timeline"]
    runs = {e["pid"]: e for e in x_events(merged, cat="comm run")}
    ends = {p: e["ts"] + e["dur"] for p, e in runs.items()}
    assert runs[1]["ts"] <= ends[0] and runs[0]["ts"] <= ends[1]
    shift = about["host_corrections_us"]["b"]
    assert -20_000 < shift < 0 and about["host_corrections_us"]["a"] == 0
    assert any("b's wall clock is off a's" in n for n in about["notes"])


def test_hosts_whose_clocks_agree_with_the_collectives_are_left_alone(tmp_path):
    merged = timeline.merge([two_ranks(tmp_path, skew1=200_000, hosts=("a", "b"))])
    about = merged["otherData"]["spmd_timeline"]
    assert about["host_corrections_us"] == {"a": 0.0, "b": 0.0} and about["notes"] == []


def test_hosts_without_a_shared_collective_are_noted(tmp_path):
    write_rank(tmp_path / "p.rank0", 0, 2, perf0=0, ops=[("mul", 0, 10)], host="a")
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=0, ops=[("mul", 0, 10)], host="b")
    notes = timeline.merge([tmp_path / "p"])["otherData"]["spmd_timeline"]["notes"]
    assert len(notes) == 1 and "share no collective" in notes[0]


def test_collectives_that_fit_no_offset_are_noted_not_used(tmp_path):
    # two allreduces that would need rank 1 moved both ways: +5 ms and -5 ms
    comm0 = [("run", "allreduce", 0, MS), ("run", "allreduce", 100 * MS, 101 * MS)]
    comm1 = [("run", "allreduce", 5 * MS, 6 * MS), ("run", "allreduce", 95 * MS, 96 * MS)]
    write_rank(tmp_path / "p.rank0", 0, 2, perf0=0, comm=comm0, host="a")
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=0, comm=comm1, host="b")
    about = timeline.merge([tmp_path / "p"])["otherData"]["spmd_timeline"]
    assert about["host_corrections_us"]["b"] == 0
    assert any("fit no single offset" in n for n in about["notes"])


def test_a_wall_clock_step_while_profiling_is_noted(tmp_path):
    write_rank(tmp_path / "p.rank0", 0, 2, perf0=0, ops=[("mul", 0, 10)])
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=0, ops=[("mul", 0, 10)], step_ns=-3 * MS)
    notes = timeline.merge([tmp_path / "p"])["otherData"]["spmd_timeline"]["notes"]
    assert len(notes) == 1 and "rank 1's wall clock moved -3.000 ms" in notes[0]


def test_traces_are_found_by_file_directory_or_profile_path(tmp_path):
    prefix = two_ranks(tmp_path)
    by_prefix = timeline.find_traces([prefix])
    assert by_prefix == [f"{prefix}.rank0", f"{prefix}.rank1"]
    assert timeline.find_traces([tmp_path]) == by_prefix
    assert timeline.find_traces([f"{prefix}.rank1", f"{prefix}.rank0", prefix]) == \
        [f"{prefix}.rank1", f"{prefix}.rank0"]
    write_rank(tmp_path / "single", 0, 1, perf0=0, ops=[("mul", 0, 10)])
    assert timeline.find_traces([tmp_path / "single"]) == [str(tmp_path / "single")]


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "nothing", r"no trace at .*nothing: neither a file nor a profile path"),
    (lambda d: d, r"is a directory without per-rank traces"),
])
def test_missing_traces_are_refused(tmp_path, make, message):
    with pytest.raises(InvalidArgumentError, match=message):
        timeline.merge([make(tmp_path)])


def test_a_directory_of_two_profiles_and_an_ambiguous_prefix_are_refused(tmp_path):
    two_ranks(tmp_path)
    write_rank(tmp_path / "q.rank0", 0, 1, perf0=0, ops=[("mul", 0, 10)])
    with pytest.raises(InvalidArgumentError, match=r"holds the traces of 2 profiles .*p\.rank\*"):
        timeline.merge([tmp_path])
    write_rank(tmp_path / "p", 0, 1, perf0=0, ops=[("mul", 0, 10)])
    with pytest.raises(InvalidArgumentError, match=r"is both a trace .* and the prefix of 2"):
        timeline.merge([tmp_path / "p"])


@pytest.mark.parametrize("content, message", [
    ("not json {", r"is not a trace: not JSON"),
    ('{"events": []}', r"is not a Chrome trace \(no 'traceEvents' list\)"),
    ('{"traceEvents": []}', r"not one spmd's profiler wrote: it has no clock record"),
    ('{"traceEvents": [], "otherData": {"spmd": {"format": "spmd-profile/0"}}}',
     r"is in trace format 'spmd-profile/0'; this spmd reads 'spmd-profile/1'"),
    ('{"traceEvents": [], "otherData": {"spmd": {"format": "spmd-profile/1", "rank": 0}}}',
     r"is damaged: its otherData.spmd record lacks or garbles 'size'"),
])
def test_files_that_are_not_spmd_traces_are_refused(tmp_path, content, message):
    (tmp_path / "t").write_text(content)
    with pytest.raises(InvalidArgumentError, match=message):
        timeline.merge([tmp_path / "t"])


def test_traces_of_different_jobs_are_refused(tmp_path):
    prefix = two_ranks(tmp_path)
    write_rank(tmp_path / "p.rank2", 2, 4, perf0=0, ops=[("mul", 0, 10)])
    with pytest.raises(InvalidArgumentError, match=r"from different jobs: .*p\.rank0, .*p\.rank1 "
                                                   r"say 2 rank\(s\); .*p\.rank2 say 4"):
        timeline.merge([prefix])
    (tmp_path / "p.rank2").unlink()
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=0, ops=[("mul", 0, 10)], job="SLURM_JOB_ID=8.0")
    write_rank(tmp_path / "p.rank0", 0, 2, perf0=0, ops=[("mul", 0, 10)], job="SLURM_JOB_ID=7.0")
    with pytest.raises(InvalidArgumentError, match=r"the launcher's job ids differ"):
        timeline.merge([prefix])


def test_a_rank_twice_or_missing_is_refused(tmp_path):
    prefix = two_ranks(tmp_path)
    write_rank(tmp_path / "other", 1, 2, perf0=0, ops=[("mul", 0, 10)])
    with pytest.raises(InvalidArgumentError, match=r"rank 1 twice: .*p\.rank1 and .*other"):
        timeline.merge([prefix, tmp_path / "other"])
    with pytest.raises(InvalidArgumentError, match=r"rank\(s\) 1 of the job's 2 missing"):
        timeline.merge([f"{prefix}.rank0"])
    merged = timeline.merge([f"{prefix}.rank0"], force=True)
    assert {e["pid"] for e in merged["traceEvents"]} == {0}


def test_traces_of_runs_far_apart_in_time_are_refused(tmp_path):
    prefix = two_ranks(tmp_path)
    write_rank(tmp_path / "p.rank1", 1, 2, perf0=0, skew_ns=-3600 * 10**9,
               ops=[("mul", 0, 10)])  # profiled an hour earlier: an earlier run's file
    with pytest.raises(InvalidArgumentError, match=r"not from one run: .*p\.rank1 \(rank 1\) "
                                                   r"was profiled from .* 3599\.1 s apart"):
        timeline.merge([prefix])
    assert len(x_events(timeline.merge([prefix], force=True))) == 6


def test_a_profiled_run_with_two_places_records_its_collectives(tmp_path, capsys):
    main_program, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_program, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 3))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main_program).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 2)
    with fluid_profiler.profiler("CPU", "total", str(tmp_path / "profile")):
        for _ in range(2):
            exe.run(compiled, feed={"x": np.ones((4, 4), "float32")}, fetch_list=[loss],
                    scope=scope)
    assert "Profiling Report" in capsys.readouterr().out
    merged = timeline.merge([tmp_path / "profile"])
    for kind in ("comm issue", "comm run"):
        found = x_events(merged, 0, kind)
        assert "allreduce" in {e["name"] for e in found}, kind
        assert all(e["args"]["comm"] == "LocalCommunicator" and e["args"]["processes"] == 1
                   for e in found)
    assert {e["args"]["member"] for e in x_events(merged, 0, "comm run")} == {0, 1}
    trace = json.loads((tmp_path / "profile").read_text())["traceEvents"]
    assert all(e["ph"] == "X" for e in trace)  # the rank's own trace: events only, as before


def test_collectives_on_the_immediate_engine_are_recorded_while_profiling(tmp_path):
    comm = SelfCommunicator()
    comm.iallreduce(np.ones(3))  # profiling off: nothing recorded anywhere
    profiler.start_profiler("CPU")
    rec = profiler.active()
    comm.iallreduce(np.ones(3))
    profiler.stop_profiler(None, str(tmp_path / "p"))
    kinds = sorted((kind, name, args["bytes"]) for kind, name, _, _, _, args in rec.comm_events)
    assert kinds == [("issue", "allreduce", 24), ("run", "allreduce", 24)]


def test_the_command_writes_the_merged_trace_and_says_what_went_wrong(tmp_path, capsys):
    prefix = two_ranks(tmp_path, skew1=20 * MS, hosts=("a", "b"))
    out = tmp_path / "timeline.json"
    assert main(["merge", "--out", str(out), prefix]) == 0
    captured = capsys.readouterr()
    assert f"wrote {out}: 2 of 2 rank(s), 10 events" in captured.out
    assert "note: b's wall clock is off a's" in captured.err
    assert {e["pid"] for e in json.loads(out.read_text())["traceEvents"]} == {0, 1}
    assert main(["merge", "--out", str(out), str(tmp_path / "none")]) == 2
    assert "spmd.timeline merge: error: no trace at" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["merge"])  # no TRACE: argparse's usage error
