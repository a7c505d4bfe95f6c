"""The Dataset API in one process: the model trained by train_from_dataset equals the same
model trained by a DataLoader over the same batches; several reader threads take turns; a
CompiledProgram over 2 places equals one place fed both batches; DataLoader.from_dataset with 2
places; the in-memory operations (load, shuffle, sizes, release); fluid's desc() text."""
from __future__ import annotations

import contextlib
import io

import dataset_api_model as model
import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.core.lod import LoDTensor
from spmd.executor.dataset_run import FetchHandler


def write(path, rows):
    path.write_text("".join(model.multislot_line(r) for r in rows))
    return str(path)


def dataset(kind, variables, files, batch_size=8, threads=1):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(variables)
    ds.set_batch_size(batch_size)
    ds.set_thread(threads)
    ds.set_filelist(files)
    if kind == "InMemoryDataset":
        ds.load_into_memory()
    return ds


def trained(run, seed=3):
    """Parameters after `run(exe, main, variables, loss, scope)` from seeded initial values."""
    main, startup, variables, loss = model.build(fluid)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(seed)
        for name in model.PARAMS:
            shape = np.array(scope.find_var(name).get_tensor()).shape
            scope.var(name).get_tensor().set(
                (0.3 * rng.standard_normal(shape)).astype("float32"), fluid.CPUPlace())
        run(exe, main, variables, loss, scope)
        return {n: np.array(scope.find_var(n).get_tensor()) for n in model.PARAMS}


def loader_batches(rows, batch_size):
    """The batches of `rows` as a DataLoader's batch generator yields them (no zero dropped:
    the QueueDataset's reading)."""
    for start in range(0, len(rows), batch_size):
        part = rows[start:start + batch_size]
        dense = np.array([r[0] for r in part], "float32")
        ids = [LoDTensor(np.concatenate([r[k] for r in part]).reshape(-1, 1).astype("int64"),
                         [np.cumsum([0] + [len(r[k]) for r in part]).tolist()])
               for k in (1, 2)]
        label = np.array([[r[3]] for r in part], "int64")
        yield [dense, ids[0], ids[1], label]


def test_train_from_dataset_equals_a_dataloader_over_the_same_data(tmp_path):
    rows = model.rows(5, 30)
    path = write(tmp_path / "d.txt", rows)

    def by_dataset(exe, main, variables, loss, scope):
        exe.train_from_dataset(main, dataset("QueueDataset", variables, [path]), scope=scope)

    def by_loader(exe, main, variables, loss, scope):
        loader = fluid.io.DataLoader.from_generator(feed_list=variables, capacity=4)
        loader.set_batch_generator(lambda: loader_batches(rows, 8), places=fluid.CPUPlace())
        steps = 0
        for feed in loader():
            exe.run(main, feed=feed[0], scope=scope)
            steps += 1
        assert steps == 4

    a, b = trained(by_dataset), trained(by_loader)
    for name in model.PARAMS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_reader_threads_take_turns(tmp_path):
    """thread=2 over an InMemoryDataset: two contiguous shares, batches run in turn (share 0's
    first, share 1's first, ...), as one thread over a file in that order."""
    rows = model.rows(6, 32)
    path = write(tmp_path / "d.txt", rows)
    turns = rows[0:8] + rows[16:24] + rows[8:16] + rows[24:32]
    in_turn = write(tmp_path / "turns.txt", turns)

    def threads2(exe, main, variables, loss, scope):
        exe.train_from_dataset(main, dataset("InMemoryDataset", variables, [path], threads=2),
                               scope=scope)

    def one(exe, main, variables, loss, scope):
        exe.train_from_dataset(main, dataset("InMemoryDataset", variables, [in_turn]),
                               scope=scope)

    a, b = trained(threads2), trained(one)
    for name in model.PARAMS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_compiled_program_on_two_places_equals_one_place_fed_both_batches(tmp_path):
    rows = model.rows(7, 32)
    path = write(tmp_path / "d.txt", rows)
    both = write(tmp_path / "both.txt", rows[0:8] + rows[16:24] + rows[8:16] + rows[24:32])

    def parallel(exe, main, variables, loss, scope):
        compiled = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, places=fluid.cpu_places(2))
        with contextlib.redirect_stdout(printed):
            exe.train_from_dataset(compiled, dataset("InMemoryDataset", variables, [path],
                                                     threads=2), scope=scope,
                                   fetch_list=[loss], fetch_info=["loss"], print_period=1)

    def single(exe, main, variables, loss, scope):
        exe.train_from_dataset(main, dataset("InMemoryDataset", variables, [both], 16),
                               scope=scope)

    printed = io.StringIO()
    a, b = trained(parallel), trained(single)
    for name in model.PARAMS:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert printed.getvalue().count("loss\tmean_0.tmp_0") == 2  # place 0's loss, each run


def test_fetches_print_every_print_period_batches(tmp_path):
    path = write(tmp_path / "d.txt", model.rows(8, 40))  # 5 batches of 8
    out = io.StringIO()

    def run(exe, main, variables, loss, scope):
        with contextlib.redirect_stdout(out):
            exe.train_from_dataset(main, dataset("QueueDataset", variables, [path]),
                                   scope=scope, fetch_list=[loss], fetch_info=["the loss"],
                                   print_period=2)

    trained(run)
    printed = out.getvalue()
    assert printed.count("the loss\tmean_0.tmp_0\t\tlod: {}\n\tdim: 1\n") == 2  # batches 2, 4


def test_fetch_list_and_fetch_info_must_pair(tmp_path):
    path = write(tmp_path / "d.txt", model.rows(8, 8))

    def run(exe, main, variables, loss, scope):
        with pytest.raises(ValueError, match="fetch_info"):
            exe.train_from_dataset(main, dataset("QueueDataset", variables, [path]),
                                   scope=scope, fetch_list=[loss], fetch_info=[])

    trained(run)


def test_fetch_handler_gets_the_variables_values(tmp_path):
    path = write(tmp_path / "d.txt", model.rows(8, 16))
    seen = []

    class Handler(FetchHandler):
        def handler(self, res):
            seen.append(res)

    def run(exe, main, variables, loss, scope):
        exe.train_from_dataset(main, dataset("QueueDataset", variables, [path]), scope=scope,
                               fetch_handler=Handler({"w": "fc_1.b_0"}, period_secs=0))

    final = trained(run)
    assert len(seen) == 2 and set(seen[-1]) == {"w"}
    np.testing.assert_array_equal(seen[-1]["w"], final["fc_1.b_0"])


def test_dataloader_from_dataset_gives_each_place_its_reader(tmp_path):
    a = write(tmp_path / "a.txt", model.rows(1, 10))
    b = write(tmp_path / "b.txt", model.rows(2, 4))
    _, _, variables, _ = model.build(fluid)
    ds = dataset("QueueDataset", variables, [a, b], batch_size=4, threads=2)
    steps = [[int(np.array(f["label"]).shape[0]) for f in step]
             for step in fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(2), False)]
    assert steps == [[4, 4], [4], [2]]  # place 0 reads a.txt (10), place 1 b.txt (4)
    steps = [[int(np.array(f["label"]).shape[0]) for f in step]
             for step in fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(2), True)]
    assert steps == [[4, 4], [4]]
    with pytest.raises(Exception, match="not less than place number"):
        fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(3))


def test_in_memory_operations(tmp_path):
    rows = model.rows(9, 12)
    path = write(tmp_path / "d.txt", rows)
    _, _, variables, _ = model.build(fluid)
    ds = dataset("InMemoryDataset", variables, [path], batch_size=12)
    assert (ds.get_memory_data_size(), ds.get_shuffle_data_size()) == (12, 0)

    def labels_and_dense():
        step = next(iter(fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()])))
        return np.array(step[0]["dense"])

    before = labels_and_dense()
    np.testing.assert_allclose(before, np.array([r[0] for r in rows], "float32"))
    ds.set_shuffle_seed(4)
    ds.local_shuffle()
    after = labels_and_dense()
    assert not np.array_equal(after, before)  # shuffled: the same rows in another order
    np.testing.assert_array_equal(after[np.lexsort(after.T)], before[np.lexsort(before.T)])
    ds.global_shuffle()  # without fleet: this trainer alone
    assert (ds.get_memory_data_size(), ds.get_shuffle_data_size()) == (12, 12)
    ds.release_memory()
    assert (ds.get_memory_data_size(), ds.get_shuffle_data_size()) == (0, 0)
    with pytest.raises(Exception, match="load_into_memory"):
        fluid.Executor(fluid.CPUPlace()).train_from_dataset(fluid.Program(), ds)


def test_queue_dataset_refuses_shuffles_and_fits_threads_to_files(tmp_path):
    ds = fluid.DatasetFactory().create_dataset()
    assert type(ds).__name__ == "QueueDataset"
    for shuffle in (ds.local_shuffle, ds.global_shuffle):
        with pytest.raises(Exception, match="does not support .* shuffle"):
            shuffle()
    ds.set_filelist(["a", "b"])
    assert ds.effective_threads(5) == 2
    with pytest.raises(ValueError, match="datafeed class Nope does not exist"):
        fluid.DatasetFactory().create_dataset("Nope")
    assert type(fluid.DatasetFactory().create_dataset("FileInstantDataset")).__name__ == \
        "FileInstantDataset"


def test_desc_is_fluids_text():
    """fluid 1.8.5 printed this desc() for these two variables and set_batch_size(8)."""
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64", lod_level=1)
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([x, y])
    ds.set_batch_size(8)
    assert ds.desc() == (
        'name: "MultiSlotInMemoryDataFeed"\nbatch_size: 8\nmulti_slot_desc {\n  slots {\n'
        '    name: "x"\n    type: "float"\n    is_dense: true\n    is_used: true\n'
        '    shape: -1\n    shape: 3\n  }\n  slots {\n    name: "y"\n    type: "uint64"\n'
        '    is_used: true\n  }\n}\npipe_command: "cat"\n')
    assert ds.proto_desc.batch_size == 8
    assert [s.name for s in ds.proto_desc.multi_slot_desc.slots if s.is_used] == ["x", "y"]


def test_set_use_var_refuses_other_dtypes():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        z = fluid.layers.data(name="z", shape=[1], dtype="int32")
    with pytest.raises(ValueError, match="only supports dtype=float32 and dtype=int64"):
        fluid.DatasetFactory().create_dataset().set_use_var([z])


def test_pslib_features_are_refused_with_the_reason():
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    for call in (lambda: ds.set_parse_ins_id(True), lambda: ds.set_merge_by_lineid(),
                 lambda: ds.set_fea_eval(10), lambda: ds.slots_shuffle(["a"])):
        with pytest.raises(ValueError, match="pslib"):
            call()
    ds.set_parse_ins_id(False)  # the default: nothing to refuse
    assert ds.get_pv_data_size() == 0
    with pytest.raises(Exception, match="BoxPS"):
        fluid.dataset.BoxPSDataset()


def test_debug_profiles_the_run_and_prints_its_throughput(tmp_path):
    path = write(tmp_path / "d.txt", model.rows(8, 16))
    out = io.StringIO()

    def run(exe, main, variables, loss, scope):
        with contextlib.redirect_stdout(out):
            exe.train_from_dataset(main, dataset("QueueDataset", variables, [path]),
                                   scope=scope, debug=True)

    trained(run)
    printed = out.getvalue()
    assert "sequence_pool" in printed  # the profiler's table names the ops
    assert "train_from_dataset: 2 run(s), 16 instance(s) in" in printed
