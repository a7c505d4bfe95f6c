"""A CompiledProgram runs as one job, of the kind its distribution names in the table of job
kinds (executor/job.py's JOB_KINDS; parameter-server mode's ops name theirs, OpDef.job_kind):
Executor.run makes it once, on the first run's scope, and steps it; the job holds its own
plan cache, and nothing calls back into the executor."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.executor.job import JOB_KINDS


def program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        out = fluid.layers.scale(x, 2.0)
    return main, out


class RecordingRunner:
    """A job for a kind of distribution of its own: runs the program for the role it was
    made for and records what the executor handed it."""

    made: list = []
    started = False
    state_sharding = None

    def __init__(self, compiled, place, scope):
        from spmd.executor.plan_cache import PlanCache

        self.compiled, self.place, self.scope, self.calls = compiled, place, scope, []
        self.plans = PlanCache()
        RecordingRunner.made.append(self)

    def start(self, scope, sharded_state=None):
        self.started = True

    def step(self, scope, feed, fetch_names, return_numpy, return_merged):
        self.calls.append((feed, fetch_names, self.plans))
        return [np.full(2, 7.0)]


def test_executor_runs_the_runner_of_the_programs_kind(monkeypatch):
    monkeypatch.setitem(JOB_KINDS, "recording", RecordingRunner)
    RecordingRunner.made.clear()
    main, out = program()
    compiled = fluid.CompiledProgram(main)
    compiled.distribution = "recording"
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    feed = {"x": np.ones((3, 2), "float32")}
    for _ in range(2):
        (got,) = exe.run(compiled, feed=feed, fetch_list=[out], scope=scope)
        np.testing.assert_array_equal(got, np.full(2, 7.0))
    (runner,) = RecordingRunner.made  # made once, on the first run's scope
    assert runner.compiled is compiled and runner.scope is scope
    assert [c[1] for c in runner.calls] == [[out.name], [out.name]]
    assert compiled.job is runner and runner.started  # started once, before its first step
    assert all(c[2] is runner.plans for c in runner.calls)  # the job's own plan cache


def test_a_program_compiled_without_distribution_runs_as_it_is():
    main, out = program()
    compiled = fluid.CompiledProgram(main)
    assert compiled.distribution is None
    exe = fluid.Executor(fluid.CPUPlace())
    (got,) = exe.run(compiled, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[out],
                     scope=fluid.Scope())
    np.testing.assert_array_equal(got, np.full((1, 2), 2.0))
    assert exe.plan_cache.find(main, ["x"], [out.name]) is not None  # the executor's plan
    assert compiled.data_parallel_program is None and compiled.place_scopes is None


def test_an_unknown_kind_names_the_registered_ones():
    main, out = program()
    compiled = fluid.CompiledProgram(main)
    compiled.distribution = "no-such-kind"
    with pytest.raises(InvalidArgumentError, match=r"registered: \[.*'data_parallel'"):
        fluid.Executor(fluid.CPUPlace()).run(compiled, feed={"x": np.ones((1, 2), "float32")},
                                             fetch_list=[out], scope=fluid.Scope())
