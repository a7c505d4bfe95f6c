"""Hierarchical allreduce without launching MPI: which node size a job asks for, the errors a
person can act on ([rank r/n], what, expected vs got, the fix), the layout's wording, and a
world of one. The collective itself runs under mpiexec: tests/dist/mpi/test_hierarchical_
allreduce.py."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.hierarchy import SHARED, NodeLayout, node_size_for
from spmd.errors import InvalidArgumentError
from spmd.flags import flags

FIELD = "BuildStrategy.hierarchical_allreduce_inter_nranks"


def test_the_field_comes_first_then_the_environment_then_mpi():
    assert node_size_for(2, size=4, env_node_size=4) == (2, f"{FIELD}=2")
    assert node_size_for(0, size=4, env_node_size=2) == (2, "SPMD_NODE_SIZE=2")
    assert node_size_for(0, size=4) == (0, SHARED)
    assert node_size_for(4, size=4)[0] == 4  # one node: allowed, the flat path runs
    assert node_size_for(np.int64(2), size=8)[0] == 2


@pytest.mark.parametrize("inter_nranks, size, expected, fix", [
    (3, 4, r"expected one of \[2, 4\], got 3",
     rf"launch a multiple of 3 processes or set {FIELD} to one of those"),
    (8, 4, r"8 processes per node \(more than the job has\) do not divide the 4 processes.*"
           r"expected one of \[2, 4\], got 8", "launch a multiple of 8 processes"),
    (2, 6, None, None),
    (4, 6, r"expected one of \[2, 3, 6\], got 4", "or set"),
])
def test_inter_nranks_must_divide_the_processes(inter_nranks, size, expected, fix):
    if expected is None:
        assert node_size_for(inter_nranks, size=size, rank=1)[0] == inter_nranks
        return
    with pytest.raises(InvalidArgumentError) as error:
        node_size_for(inter_nranks, size=size, rank=1)
    message = str(error.value)
    assert message.startswith(f"[rank 1/{size}] {FIELD}={inter_nranks}: ")
    assert "fluid: the number of trainers must be divisible by it" in message
    assert re.search(expected, message), message
    assert re.search(fix, message), message


def test_one_process_per_node_is_refused_as_fluid_does():
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank 0/4\] {FIELD}=1: expected more than 1 process per node "
                             r"\(as fluid requires\): it counts the processes within one node "
                             r"\(fluid's 'inter'\), not the nodes.*set "
                             r"use_hierarchical_allreduce=False, or set .* \(\[2, 4\]\), or 0"):
        node_size_for(1, size=4)


@pytest.mark.parametrize("value", [-1, True, 2.0, "2", None])
def test_inter_nranks_must_be_a_count(value):
    with pytest.raises(InvalidArgumentError,
                       match=rf"\[rank 2/4\] {FIELD}=.*: expected the number of processes per "
                             rf"node, an integer > 1 dividing the 4 processes \(\[2, 4\]\), or 0 "
                             rf"to find the nodes .*got "):
        node_size_for(value, size=4, rank=2)


def test_spmd_node_size_must_divide_the_processes():
    with pytest.raises(InvalidArgumentError,
                       match=r"\[rank 3/6\] SPMD_NODE_SIZE=4: 4 processes per node do not divide "
                             r"the 6 processes.*expected one of \[2, 3, 6\], got 4; launch a "
                             r"multiple of 4 processes or set SPMD_NODE_SIZE to one of those "
                             r"\(or unset it"):
        node_size_for(0, size=6, rank=3, env_node_size=4)
    # one process per node, from the environment (it describes the machine): the flat path
    assert node_size_for(0, size=4, env_node_size=1) == (1, "SPMD_NODE_SIZE=1")


def test_spmd_node_size_is_read_in_flags():
    assert flags({}).node_size == 0
    assert flags({"SPMD_NODE_SIZE": "2"}).node_size == 2
    with pytest.raises(InvalidArgumentError, match="SPMD_NODE_SIZE='two' is not an integer"):
        flags({"SPMD_NODE_SIZE": "two"})
    with pytest.raises(InvalidArgumentError, match="SPMD_NODE_SIZE=-2 must be >= 0"):
        flags({"SPMD_NODE_SIZE": "-2"})


@pytest.mark.parametrize("nodes, largest, size, hierarchical, words", [
    (2, 2, 4, True, "4 processes as 2 node(s) of 2, from x: hierarchical allreduce (reduce "
                    "within each node, allreduce across the node leaders, broadcast within "
                    "each node)"),
    (1, 4, 4, False, "4 processes as 1 node(s) of 4, from x: flat allreduce (one node"),
    (4, 1, 4, False, "flat allreduce (one process per node"),
    (2, 3, 4, True, "4 processes as 2 nodes of up to 3"),  # MPI's nodes may differ in size
])
def test_layout(nodes, largest, size, hierarchical, words):
    layout = NodeLayout(rank=0, size=size, node=0, nodes=nodes, local_rank=0,
                        node_size=largest, largest=largest, source="x")
    assert layout.hierarchical is hierarchical
    assert words in layout.describe()


def test_one_process_runs_and_has_no_hierarchy():
    """A script asking for the hierarchical allreduce also runs as one process (nothing is
    aggregated across processes, so nothing is checked or split)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float64")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    strategy = fluid.BuildStrategy()
    strategy.use_hierarchical_allreduce = True
    strategy.hierarchical_allreduce_inter_nranks = 3
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    assert compiled.allreduce_layout is None  # not run yet
    (out,) = exe.run(compiled, feed={"x": np.ones((4, 3))}, fetch_list=[loss], scope=scope)
    assert out.shape == (2,)
    assert compiled.allreduce_layout is None


def test_importing_the_hierarchy_loads_no_mpi():
    code = ("import sys, spmd.comm.hierarchy, spmd.comm.factory; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'mpi4py')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
