"""Data-parallel behaviours across ranks: a persistable variable fed every step (a learning
rate of shape [1]) reaches every place of every rank whole, never split (N ranks x 2 places
equal one process on the whole batch); fluid.profiler times a data-parallel run on every
rank and writes one Chrome trace per rank; Print names the rank."""
from __future__ import annotations

import json

import numpy as np
import pytest
from dp_models import batches, params, shard

import spmd.fluid as fluid
import spmd.fluid.profiler as profiler
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], "float64")
        y = fluid.data("y", [None, 1], "int64")
        logits = fluid.layers.fc(fluid.layers.fc(x, 16, act="tanh"), 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        lr = fluid.layers.create_global_var([1], 0.1, "float64", persistable=True, name="lr")
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, loss


def run(program, main, startup, loss, shard_of):
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for step, (x, y) in enumerate(batches("float64", 3)):
        lr = np.array([0.2 / (step + 1)])
        exe.run(program, feed={"x": shard_of(x), "y": shard_of(y), "lr": lr},
                fetch_list=[loss], scope=scope)
    return params(scope, main)


@pytest.mark.parametrize("places", [1, 2])
def test_fed_learning_rate_is_not_split(places):
    t = detect()
    main, startup, loss = build()
    want = run(main, main, startup, loss, lambda a: a)
    main, startup, loss = build()
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * places)
    got = run(compiled, main, startup, loss, lambda a: shard(a, t.rank, t.size))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


def test_profiler_writes_a_trace_per_rank(tmp_path, capsys):
    t = detect()
    path = str(tmp_path / "profile")  # each rank's own folder; the file name carries the rank
    main, startup, loss = build()
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 2)
    with profiler.profiler("CPU", "total", path):
        run(compiled, main, startup, loss, lambda a: shard(a, t.rank, t.size))
    out = capsys.readouterr().out
    name = path if t.size == 1 else f"{path}.rank{t.rank}"
    with open(name) as f:
        events = json.load(f)["traceEvents"]
    assert {e["pid"] for e in events} == {t.rank}
    assert len({e["tid"] for e in events if e["name"] == "ParallelExecutor::Run"}) == 2
    assert "Profiling Report" in out and "ParallelExecutor::Run" in out
    assert ("Rank: " in out) == (t.size > 1)


def test_print_names_the_rank(capsys):
    t = detect()
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [2], "float32")
        fluid.layers.Print(x, message="seen")
    fluid.Executor().run(main, feed={"x": np.full(2, t.rank, "float32")})
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"[rank {t.rank}/{t.size}] ") == (t.size > 1)
    assert "\tseen\t" in first
