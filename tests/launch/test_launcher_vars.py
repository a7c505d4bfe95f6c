"""The process managers' variables are one table (spmd/launcher_vars.py) that paddle-launch and
spmd both read (issue 23 item 7): the launcher and the worker it starts agree on who started a
process, its rank and size and its node's ranks, because they read the same names; no other
module of spmd or launch spells those names."""
from __future__ import annotations

import ast
import pathlib

import pytest

import launch.env
import launch.scheduler
import spmd.comm.topology as topology
import spmd.launcher_vars as pm

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_launch_and_spmd_hold_the_same_table():
    assert launch.scheduler.pm is pm
    assert topology.pm is pm
    assert not (ROOT / "launch" / "process_manager.py").exists()


@pytest.mark.parametrize("name", pm.LAUNCH_VARS)
def test_each_launch_variable_means_started_by_mpi_to_both(name):
    env = {name: "0"}
    assert topology.launched_by_mpi(env)
    assert launch.scheduler.detect_scheduler(env) == launch.scheduler.MPI


@pytest.mark.parametrize("rank_var,size_var", pm.RANK_SIZE_VARS)
def test_each_rank_pair_gives_both_the_same_rank_and_size(rank_var, size_var):
    env = {"PMI_FD": "9", rank_var: "3", size_var: "4"}  # PMI_FD: started by a manager
    assert topology.launcher_rank_size(env) == (3, 4)
    assert launch.scheduler.mpi_rank_size(env) == (3, 4)
    filled = dict(env)
    assert topology.fill_paddle_env(filled)
    assert (filled["PADDLE_TRAINER_ID"], filled["PADDLE_TRAINERS_NUM"]) == ("3", "4")


@pytest.mark.parametrize("name", pm.LOCAL_SIZE_VARS)
def test_each_local_size_variable_counts_the_node_for_both(name):
    env = {"PMI_FD": "9", name: "3"}
    assert topology.launcher_local_size(env) == 3 == pm.local_size(env)


def test_slurm_tasks_per_node_has_one_parser():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "7", "PMI_FD": "9", "SLURM_NODEID": "2",
           "SLURM_TASKS_PER_NODE": "2(x3),1"}
    assert topology.launcher_local_size(env) == 2
    assert launch.scheduler.slurm_tasks_per_node({"SLURM_TASKS_PER_NODE": "2(x3),1"}) == 2
    assert pm.tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert _modules_with(lambda text: "(?:\\(x" in text) == ["spmd/launcher_vars.py"]


def test_the_pserver_roles_drop_every_process_manager_variable():
    """launch.env's pserver roles must not look like MPI ranks: it drops the table's names."""
    env = {name: "1" for name in pm.LAUNCH_VARS + pm.LOCAL_RANK_VARS + pm.LOCAL_SIZE_VARS}
    role = launch.env.ps_mpi_env(0, 2, 1, env)
    assert not pm.launched_by_mpi(role)
    assert pm.local_size(role) is None


def _modules_with(found) -> list[str]:
    """The modules of spmd and launch with a string constant for which `found` holds."""
    hits = []
    for path in sorted([*(ROOT / "spmd").rglob("*.py"), *(ROOT / "launch").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    found(node.value):
                hits.append(str(path.relative_to(ROOT)))
                break
    return hits


def test_one_libmpi_lookup():
    """spmd's bounded MPI_Init and paddle-launch's search for mpiexec find the library alike."""
    assert _modules_with(lambda text: text == "/proc/self/maps") == ["spmd/launcher_vars.py"]
    import mpi4py

    mpi4py.rc.initialize = False
    from mpi4py import MPI  # noqa: F401  (loads the library, does not initialize it)

    assert (pm.loaded_libmpi() or "").rsplit("/", 1)[-1].startswith("libmpi")


def _names_of_the_table() -> set[str]:
    names = set(pm.LAUNCH_VARS) | set(pm.LOCAL_RANK_VARS) | set(pm.LOCAL_SIZE_VARS)
    names |= {v for pair in pm.RANK_SIZE_VARS for v in pair} | set(pm.NODE_NAME_VARS)
    return {n for n in names if not n.startswith("SLURM")}  # SLURM's are read for more


def test_no_other_module_spells_the_process_managers_variables():
    names, spelled = _names_of_the_table(), []
    for path in sorted([*(ROOT / "spmd").rglob("*.py"), *(ROOT / "launch").rglob("*.py")]):
        if path == ROOT / "spmd" / "launcher_vars.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert not spelled, "read these through spmd.launcher_vars:\n" + "\n".join(spelled)


def test_the_table_imports_nothing_and_does_nothing_when_imported():
    tree = ast.parse((ROOT / "spmd" / "launcher_vars.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "re", "collections.abc"}, imported
    for node in tree.body:  # only docstring, imports, constant tables and functions
        assert isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign,
                                 ast.FunctionDef)), ast.dump(node)[:200]
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant)


def test_the_launcher_reads_the_table_without_arming_a_supervisor(token):
    """paddle-launch under mpiexec imports spmd (for this table) and then execs the worker: a
    supervisor forked in it would outlive the exec and stand in for a program it cannot see
    (MPI_Init after the job: 'PMI_Init returned -1'). The launcher is never a rank."""
    from launch_helpers import MPIEXEC, PYTHON, run

    # one write a rank: print() writes each argument apart, and unbuffered ranks interleave them
    code = ("import os, launch.scheduler, spmd.guard as g; "
            "os.write(1, f\"supervised {os.environ.get('SPMD_SUPERVISED')} {g.supervised()}\\n\""
            ".encode())")
    res = run([MPIEXEC, "-n", "2", PYTHON, "-c", code], token, timeout=60)
    assert res.returncode == 0, res.output[-3000:]
    assert res.stdout.count("supervised None False") == 2, res.output[-3000:]


def test_spmd_imports_nothing_of_launch():
    """The launcher imports spmd (this table, the flags, the job token), never the other way
    round: an env-only trainer finds its mpiexec without launch.mpi."""
    found = []
    for path in sorted((ROOT / "spmd").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level \
                else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names
                      if n.split(".")[0] == "launch"]
    assert not found, found
