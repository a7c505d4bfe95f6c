"""The Dataset API at any rank count: global_shuffle(fleet) deals the union of every trainer's
records, each exactly once and intact, over MPI; data parallel train_from_dataset (each rank
its own file, a CompiledProgram with_data_parallel) equals one process trained over the union,
batch k being every rank's batch k; after a global_shuffle (unequal shares) the ranks stop
together and end with identical parameters."""
from __future__ import annotations

import warnings

import dataset_api_model as model
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.comm.factory import world_communicator
from spmd.comm.topology import detect
from spmd.fluid.incubate.fleet.base import role_maker
from spmd.fluid.incubate.fleet.collective import fleet

pytestmark = pytest.mark.mpi(min_size=1)
BATCH, STEPS = 8, 2


@pytest.fixture(scope="module", autouse=True)
def fleet_ready():
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))


def gathered(values: np.ndarray) -> np.ndarray:
    """Every rank's 1-D int64 `values`, concatenated in rank order."""
    comm = world_communicator()
    sizes = comm.allgather(np.array([values.size], np.int64)).ravel()
    padded = np.full(int(sizes.max()), -1, np.int64)
    padded[:values.size] = values
    rows = comm.allgather(padded).reshape(len(sizes), -1)
    return np.concatenate([rows[r, :sizes[r]] for r in range(len(sizes))])


def record_lines(rank: int) -> list[str]:
    """Rank `rank`'s records: a dense record id, sparse ids and sparse floats made from it."""
    lines = []
    for i in range(5 + 3 * rank):
        rid = 1000 * rank + i + 1
        n = 1 + i % 3
        ids = " ".join(str(rid * 10 + k) for k in range(n))
        floats = " ".join(repr(rid / 7 + k) for k in range(n))
        lines.append(f"1 {rid} {n} {ids} {n} {floats}\n")
    return lines


def test_global_shuffle_deals_the_union_once_and_intact(tmp_path):
    t = detect()
    path = tmp_path / f"part{t.rank}.txt"
    path.write_text("".join(record_lines(t.rank)))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        rid = fluid.data(name="rid", shape=[None, 1], dtype="int64")
        ids = fluid.data(name="ids", shape=[None, 1], dtype="int64", lod_level=1)
        floats = fluid.data(name="floats", shape=[None, 1], dtype="float32", lod_level=1)
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([rid, ids, floats])
    ds.set_batch_size(1)
    ds.set_filelist([str(path)])
    ds.load_into_memory()
    ds.set_shuffle_seed(11)
    total = sum(len(record_lines(r)) for r in range(t.size))
    assert ds.get_memory_data_size(fleet) == total
    from tests.no_pickle import forbid_pickle

    with forbid_pickle() as guard:  # records cross the ranks as raw bytes, never pickled
        ds.global_shuffle(fleet)
    assert guard.calls == []
    assert ds.get_shuffle_data_size(fleet) == total
    assert ds.get_memory_data_size() == ds.get_shuffle_data_size()
    mine = []
    for step in fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], drop_last=False):
        feed = step[0]
        r = int(np.array(feed["rid"]).ravel()[0])
        n = 1 + (r % 1000 - 1) % 3
        np.testing.assert_array_equal(np.array(feed["ids"]).ravel(),
                                      [r * 10 + k for k in range(n)])
        np.testing.assert_array_equal(np.array(feed["floats"]).ravel(),
                                      np.array([r / 7 + k for k in range(n)], "float32"))
        mine.append(r)
    everyone = gathered(np.array(mine, np.int64))
    expected = [1000 * r + i + 1 for r in range(t.size) for i in range(5 + 3 * r)]
    assert sorted(everyone.tolist()) == expected


def seeded_params(scope, seed=3):
    rng = np.random.default_rng(seed)
    for name in model.PARAMS:
        shape = np.array(scope.find_var(name).get_tensor()).shape
        scope.var(name).get_tensor().set((0.3 * rng.standard_normal(shape)).astype("float32"),
                                         fluid.CPUPlace())


def train(files, batch_size, data_parallel, shuffle=False):
    main, startup, variables, loss = model.build(fluid)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        seeded_params(scope)
        ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
        ds.set_use_var(variables)
        ds.set_batch_size(batch_size)
        ds.set_thread(1)
        ds.set_filelist(files)
        ds.load_into_memory()
        if shuffle:
            ds.set_shuffle_seed(5)
            ds.global_shuffle(fleet)
        program = main
        if data_parallel:
            program = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the left-over batches after a shuffle
            exe.train_from_dataset(program, ds, scope=scope)
        return {n: np.array(scope.find_var(n).get_tensor()) for n in model.PARAMS}


def rank_rows(rank):
    return [model.multislot_line(r) for r in model.rows(30 + rank, BATCH * STEPS)]


def test_data_parallel_equals_one_process_over_the_union(tmp_path):
    t = detect()
    mine = tmp_path / f"rank{t.rank}.txt"
    mine.write_text("".join(rank_rows(t.rank)))
    union = tmp_path / "union.txt"
    union.write_text("".join(line for k in range(STEPS) for r in range(t.size)
                             for line in rank_rows(r)[k * BATCH:(k + 1) * BATCH]))
    parallel = train([str(mine)], BATCH, data_parallel=True)
    single = train([str(union)], BATCH * t.size, data_parallel=False)
    for name in model.PARAMS:
        np.testing.assert_allclose(parallel[name], single[name], rtol=2e-5, atol=2e-6,
                                   err_msg=f"[rank {t.rank}/{t.size}] {name}")


def test_after_a_global_shuffle_the_ranks_train_together(tmp_path):
    t = detect()
    mine = tmp_path / f"rank{t.rank}.txt"
    mine.write_text("".join(model.multislot_line(r)
                            for r in model.rows(40 + t.rank, 12 + 5 * t.rank)))
    params = train([str(mine)], 4, data_parallel=True, shuffle=True)
    comm = world_communicator()
    for name in model.PARAMS:
        flat = params[name].astype(np.float64).ravel()
        everyone = comm.allgather(flat).reshape(t.size, -1)
        for r in range(t.size):
            np.testing.assert_array_equal(everyone[r], flat, err_msg=f"rank {r}: {name}")
    assert np.abs(params["fc_1.b_0"]).max() > 0  # it trained


def test_a_trainer_left_without_records_stops_with_the_others(tmp_path):
    """Only rank 0 has records; after the shuffle a rank may hold none, and then every rank
    stops at once instead of waiting for it in a collective."""
    t = detect()
    mine = tmp_path / f"rank{t.rank}.txt"
    rows = model.rows(50, 3) if t.rank == 0 else []
    mine.write_text("".join(model.multislot_line(r) for r in rows))
    params = train([str(mine)], 8, data_parallel=True, shuffle=True)
    assert all(np.isfinite(v).all() for v in params.values())
