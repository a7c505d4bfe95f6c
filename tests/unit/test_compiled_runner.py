"""A CompiledProgram compiles to one runner, chosen by its kind of distribution from a
registry (the place parameter-server mode adds its runner, which holds a program per role):
Executor.run calls that runner with its own plan cache, and nothing calls back into it."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError
from spmd.executor.compiled import RUNNERS


def program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        out = fluid.layers.scale(x, 2.0)
    return main, out


class RecordingRunner:
    """A runner for a kind of distribution of its own: runs the program for the role it
    was made for and records what the executor handed it."""

    made: list = []

    def __init__(self, compiled, place, scope):
        self.compiled, self.place, self.scope, self.calls = compiled, place, scope, []
        RecordingRunner.made.append(self)

    def run(self, scope, feed, fetch_names, return_numpy, return_merged, plan_cache):
        self.calls.append((feed, fetch_names, plan_cache))
        return [np.full(2, 7.0)]


def test_executor_runs_the_runner_of_the_programs_kind(monkeypatch):
    monkeypatch.setitem(RUNNERS, "recording", RecordingRunner)
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
    assert all(c[2] is exe.plan_cache for c in runner.calls)


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
