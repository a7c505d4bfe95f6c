"""fluid.profiler: every op and run timed while on, the summary table (fluid's columns and
sort keys), the Chrome trace, reset, start/stop pairing, bad arguments, cuda_profiler on CPU."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.fluid.profiler as profiler
from spmd import profiler as core_profiler
from tests.oracle_io import load

ORACLE = load("misc")["profiler"]


def program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 3))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    def step():
        exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss], scope=scope)

    return step


def table(text: str) -> dict:
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("thread")]
    return {r[0].split("::", 1)[1]: r for r in rows}


def test_report_has_fluid_columns_and_every_op(tmp_path, capsys):
    step = program()
    path = tmp_path / "profile"
    with profiler.profiler("CPU", "calls", str(path)):
        for _ in range(2):
            step()
    out = capsys.readouterr().out
    assert ORACLE["title"] in out
    assert ORACLE["sorted_by_calls"] in out
    head = [ln for ln in out.splitlines() if ln.startswith("Event")][0].split()
    assert head == ORACLE["columns"]
    rows = table(out)
    ops = {n: c for n, c in ORACLE["calls"].items() if n not in ("feed", "fetch")}
    for name, calls in ops.items():
        assert int(rows[name][1]) == calls, name
    assert int(rows["Executor::Run"][1]) == 2
    calls = [int(r[1]) for r in rows.values() if r[0] != "thread0::Executor::Run"]
    assert calls == sorted(calls, reverse=True)
    trace = json.loads(path.read_text())["traceEvents"]
    assert {e["name"] for e in trace} >= set(ops)
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace)


@pytest.mark.parametrize("key", ["total", "max", "min", "ave"])
def test_sorted_keys_order_rows(key, tmp_path):
    step = program()
    profiler.start_profiler("All")
    step()
    rec = core_profiler.active()
    rows = [r for r in core_profiler.summarize(rec, key) if r["name"] != "Executor::Run"]
    profiler.stop_profiler(key, str(tmp_path / "p"))
    values = [r[key] for r in rows]
    assert values == sorted(values, reverse=True)
    ratios = sum(r["ratio"] for r in rows)
    assert ratios == pytest.approx(1.0)


def test_reset_drops_earlier_steps_and_stop_without_start_is_harmless(tmp_path, capsys):
    step = program()
    profiler.stop_profiler()  # not started: nothing
    profiler.start_profiler("CPU")
    profiler.start_profiler("GPU")  # already on: ignored, as in fluid
    step()
    step()
    profiler.reset_profiler()
    step()
    profiler.stop_profiler("total", str(tmp_path / "p"))
    assert int(table(capsys.readouterr().out)["mean"][1]) == 1
    assert core_profiler.active() is None


def test_profiling_is_off_outside_the_block(tmp_path):
    with profiler.profiler("CPU", None, str(tmp_path / "p")):
        assert core_profiler.active() is not None
    assert core_profiler.active() is None


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"state must be one of \['CPU', 'GPU', 'All'\]"):
        profiler.start_profiler("TPU")
    with pytest.raises(ValueError, match="tracer_option"):
        profiler.start_profiler("CPU", "Everything")
    profiler.start_profiler("CPU")
    with pytest.raises(ValueError, match="sorted_key"):
        profiler.stop_profiler("speed")
    profiler.stop_profiler("total", "/dev/null")
    with pytest.raises(ValueError, match="output_mode"), profiler.cuda_profiler("f", "xml"):
        pass


def test_cuda_profiler_is_accepted_on_cpu(tmp_path):
    step = program()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with profiler.cuda_profiler(str(tmp_path / "nvprof.txt"), "csv"):
            step()
    assert not (tmp_path / "nvprof.txt").exists()
