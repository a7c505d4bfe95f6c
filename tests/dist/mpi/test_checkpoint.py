"""Checkpoints of data-parallel training: saved mid-run, at any rank count and in either reduce
mode, they hold what one process training on the whole batch holds, and resuming from one
gives the parameters of the uninterrupted run.

Reduce mode keeps optimizer state on its owner ranks only; the save, given the CompiledProgram
and called on every rank, assembles it whole."""
from __future__ import annotations

import numpy as np
import pytest
from dp_models import batches, build, shard

import spmd.fluid as fluid
from spmd.comm.mpi import MPICommunicator
from spmd.comm.topology import detect
from spmd.errors import CommunicationError, PreconditionError

pytestmark = pytest.mark.mpi(min_size=1)
SAVED_AT, STEPS = 2, 4


def persistables(scope, program) -> dict:
    return {v.name: np.array(scope.find_var(v.name).get_tensor())
            for v in program.list_vars() if fluid.io.is_persistable(v)}


def one_process(data):
    """Persistables of one process after SAVED_AT and after STEPS steps on the whole batch."""
    main, startup, loss = build("mlp", "adam", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    states = []
    for step, (x, y) in enumerate(data, 1):
        exe.run(main, feed={"x": x, "y": y}, scope=scope)
        if step in (SAVED_AT, STEPS):
            states.append(persistables(scope, main))
    return states


def data_parallel(mode: str, places: int):
    main, startup, loss = build("mlp", "adam", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.reduce_strategy = getattr(fluid.BuildStrategy.ReduceStrategy, mode)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * places)
    return main, startup, loss, scope, exe, compiled


def train(exe, compiled, scope, data):
    t = detect()
    for x, y in data:
        exe.run(compiled, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                scope=scope)


def assert_close(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10,
                                   atol=1e-10 * float(np.abs(value).max()), err_msg=name)


@pytest.mark.parametrize("places", [1, 2])
@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_save_mid_run_then_resume_equals_one_process(mpi_tmp_path, mode, places):
    tmp_path = mpi_tmp_path / f"rank{detect().rank}"  # each rank its own checkpoint
    data = batches("float64", STEPS)
    want_saved, want_end = one_process(data)

    main, _, _, scope, exe, compiled = data_parallel(mode, places)
    train(exe, compiled, scope, data[:SAVED_AT])
    with fluid.scope_guard(scope):  # every rank saves, each into its own directory
        fluid.io.save_persistables(exe, str(tmp_path), main_program=compiled)
    saved = fluid.Scope()
    with fluid.scope_guard(saved):
        fluid.io.load_persistables(exe, str(tmp_path), main_program=main)
    assert_close(persistables(saved, main), want_saved)

    # a new job: startup, load, compile, train on
    main, startup, _, scope, exe, compiled = data_parallel(mode, places)
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, str(tmp_path), main_program=main)
    train(exe, compiled, scope, data[SAVED_AT:])
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path / "end"), main_program=compiled)
    end = fluid.Scope()
    with fluid.scope_guard(end):
        fluid.io.load_persistables(exe, str(tmp_path / "end"), main_program=main)
    assert_close(persistables(end, main), want_end)


def test_paddle_save_of_a_reduce_mode_program_holds_the_whole_state(mpi_tmp_path):
    tmp_path = mpi_tmp_path  # every rank writes the same files: renames of equal content
    data = batches("float64", SAVED_AT)
    want, _ = one_process(batches("float64", STEPS))
    main, _, _, scope, exe, compiled = data_parallel("Reduce", 2)
    train(exe, compiled, scope, data)
    with fluid.scope_guard(scope):
        fluid.io.save(compiled, str(tmp_path / "ckpt"))
    loaded = fluid.Scope()
    with fluid.scope_guard(loaded):
        fluid.io.load(main, str(tmp_path / "ckpt"), exe)
    assert_close(persistables(loaded, main), want)


def test_reduce_mode_state_without_the_compiled_program_is_a_clear_error(mpi_tmp_path):
    t = detect()
    tmp_path = mpi_tmp_path / f"rank{t.rank}"
    main, _, loss, scope, exe, compiled = data_parallel("Reduce", 2)
    train(exe, compiled, scope, batches("float64", 1))
    tag = rf"\[rank {t.rank}/{t.size}\] " if t.size > 1 else ""
    with fluid.scope_guard(scope):
        # saving from the plain program, as a one-process script does, cannot see other
        # ranks' state: the error says how to save it
        with pytest.raises(PreconditionError, match=tag + r"cannot save '.*': "
                           r"ReduceStrategy.Reduce keeps this optimizer state on rank\(s\) "
                           r"\[\d.*call the save on every rank"):
            fluid.io.save_persistables(exe, str(tmp_path / "a"), main_program=main)
        fluid.io.save_persistables(exe, str(tmp_path / "b"), main_program=compiled)
        # fluid.io.save takes no executor: from the plain program it cannot see the split
        # either, and says so instead of asking for the startup program
        with pytest.raises(PreconditionError, match=tag + r"cannot save '.*' \(optimizer state "
                           r"of '.*'\): it has no value in the scope. If a data-parallel "
                           r"CompiledProgram with ReduceStrategy.Reduce trained it"):
            fluid.io.save(main, str(tmp_path / "c"))
        # loading into a scope whose state is already split would leave the split copies stale
        with pytest.raises(PreconditionError, match=tag + r"cannot load .* already split this "
                           r"optimizer state.*before the program's first run"):
            fluid.io.load_persistables(exe, str(tmp_path / "b"), main_program=main)
    # so would another data-parallel program on this scope
    strategy = fluid.BuildStrategy()
    again = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
    x, y = batches("float64", 1)[0]
    with pytest.raises(PreconditionError, match=rf"\[rank {t.rank}/{t.size}\] optimizer state "
                       r"\[.*\] in this scope was already split"):
        exe.run(again, feed={"x": shard(x, t.rank, t.size), "y": shard(y, t.rank, t.size)},
                scope=scope)
    # the split outlives Executor.close(): a save after it still sees it
    exe.close()
    with fluid.scope_guard(scope), pytest.raises(PreconditionError, match=tag + r"cannot save "
                                                 r"'.*': ReduceStrategy.Reduce keeps"):
        fluid.io.save_persistables(exe, str(tmp_path / "a"), main_program=main)
    for refused in ("a", "c"):
        assert not (tmp_path / refused).exists() or not list((tmp_path / refused).iterdir())


@pytest.mark.parametrize("mode", ["AllReduce", "Reduce"])
def test_a_checkpoint_loaded_on_rank_0_alone_reaches_every_rank(mpi_tmp_path, mode):
    """As fluid, the first run broadcasts rank 0's persistables, optimizer state included."""
    t = detect()
    data = batches("float64", STEPS)
    _, want_end = one_process(data)
    main, startup, loss = build("mlp", "adam", "float64")
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in data[:SAVED_AT]:
        exe.run(main, feed={"x": x, "y": y}, scope=scope)
    checkpoint = str(mpi_tmp_path / f"one_process_{mode}_{t.rank}")
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, checkpoint, main_program=main)

    main, _, _, scope, exe, compiled = data_parallel(mode, 1)
    if t.rank == 0:  # the other ranks keep their fresh startup values
        with fluid.scope_guard(scope):
            fluid.io.load_persistables(exe, checkpoint, main_program=main)
    train(exe, compiled, scope, data[SAVED_AT:])
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, checkpoint + "_end", main_program=compiled)
    end = fluid.Scope()
    with fluid.scope_guard(end):
        fluid.io.load_persistables(exe, checkpoint + "_end", main_program=main)
    assert_close(persistables(end, main), want_end)


def test_a_test_program_sharing_the_variables_saves_the_whole_state(mpi_tmp_path):
    t = detect()
    data = batches("float64", SAVED_AT)
    want, _ = one_process(batches("float64", STEPS))
    main, _, loss, scope, exe, compiled = data_parallel("Reduce", 2)
    train(exe, compiled, scope, data)
    test = fluid.CompiledProgram(main.clone(for_test=True)).with_data_parallel(
        loss_name=loss.name, share_vars_from=compiled, places=[fluid.CPUPlace()] * 2)
    checkpoint = mpi_tmp_path / f"shared_{t.rank}"
    with fluid.scope_guard(scope):  # before the test program ever ran
        fluid.io.save_persistables(exe, str(checkpoint), main_program=test)
    loaded = fluid.Scope()
    with fluid.scope_guard(loaded):
        fluid.io.load_persistables(exe, str(checkpoint), main_program=main)
    assert_close(persistables(loaded, main), want)


def test_a_reduce_mode_save_on_rank_0_alone_fails_and_says_why(mpi_tmp_path):
    t = detect()
    if t.size == 1:
        pytest.skip("needs another rank that does not save")
    main, _, _, scope, exe, compiled = data_parallel("Reduce", 1)
    train(exe, compiled, scope, batches("float64", 1))
    compiled.state_sharding.timeout_s = 2.0  # the job's timeout is 60 s here
    if t.rank == 0:
        with fluid.scope_guard(scope):
            with pytest.raises(CommunicationError, match=r"\[rank 0/\d+\] saving the "
                               r"Reduce-mode optimizer state is collective: every rank must "
                               r"call the save.*not only on rank 0"):
                fluid.io.save_persistables(exe, str(mpi_tmp_path / "r0"), main_program=compiled)
            # its broadcasts no longer pair up with the other ranks': later saves refuse
            with pytest.raises(PreconditionError, match="an earlier save failed midway"):
                fluid.io.save_persistables(exe, str(mpi_tmp_path / "r0"), main_program=compiled)
    MPICommunicator().barrier()
