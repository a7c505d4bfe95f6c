"""Executor.train_from_dataset against fluid 1.8.5 (tests/oracle/make_dataset_api.py): the
CTR-style model of tests/dataset_api_model.py from fluid's initial parameters, trained over a
QueueDataset, an InMemoryDataset (which drops a sparse slot's zero ids) and a QueueDataset piped
through a MultiSlotDataGenerator script, with thread=1: the printed fetches (fluid's format)
and the parameters after equal fluid's; the batches DataLoader.from_dataset hands out equal
fluid's; the data generator writes fluid's text."""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import dataset_api_model as model
import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

ORACLE = load("dataset_api")
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"data: \[([^\]]*)\]")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dataset_api")
    files = model.write_data(str(folder))
    raw = model.write_data(str(folder), raw=True)
    gen = model.write_generator(str(folder), str(ROOT),
                                "import spmd.fluid.incubate.data_generator as dg")
    return {"files": files, "raw": raw, "pipe": f"{sys.executable} {gen}"}


def make_dataset(kind, variables, files, pipe="cat", batch_size=8):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(variables)
    ds.set_batch_size(batch_size)
    ds.set_thread(1)
    ds.set_filelist(files)
    ds.set_pipe_command(pipe)
    if kind == "InMemoryDataset":
        ds.load_into_memory()
    return ds


def train(kind, files, pipe="cat", infer=False):
    main, startup, variables, loss = model.build(fluid)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for name, value in ORACLE["init"].items():
            scope.var(name).get_tensor().set(value, fluid.CPUPlace())
        ds = make_dataset(kind, variables, files, pipe)
        run = exe.infer_from_dataset if infer else exe.train_from_dataset
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            run(main, ds, scope=scope, thread=1, fetch_list=[loss, variables[1]],
                fetch_info=["loss", "c1"], print_period=1)
        params = {n: np.array(scope.find_var(n).get_tensor()) for n in model.PARAMS}
    return out.getvalue(), params


def blocks(text):
    return [b for b in text.split("\n\t\n") if b.strip()]


@pytest.mark.parametrize("case,kind,source", [
    ("queue", "QueueDataset", "files"), ("inmemory", "InMemoryDataset", "files"),
    ("pipe", "QueueDataset", "raw"), ("infer_inmemory", "InMemoryDataset", "files")])
def test_train_from_dataset_equals_fluid(data, case, kind, source):
    want = ORACLE[case]
    printed, params = train(kind, data[source], data["pipe"] if source == "raw" else "cat",
                            infer=case.startswith("infer"))
    got_blocks, want_blocks = blocks(printed), blocks(want["printed"])
    assert len(got_blocks) == len(want_blocks) == 12  # 6 batches x (loss, c1)
    for got, exp in zip(got_blocks, want_blocks):
        # everything but the loss's last printed digit is fluid's text; the loss to 1e-5
        assert got.split("data:")[0] == exp.split("data:")[0]
        g = np.array(NUMBER.search(got).group(1).split(), float)
        e = np.array(NUMBER.search(exp).group(1).split(), float)
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)
    for name in model.PARAMS:
        np.testing.assert_allclose(params[name], want["params"][name], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{case}: {name}")


def test_the_inmemory_reading_differs_from_the_queue_reading_as_in_fluid():
    """The InMemoryDataset drops zero ids from a sparse slot; the two runs part there."""
    q, m = ORACLE["queue"]["params"], ORACLE["inmemory"]["params"]
    assert np.abs(q["embedding_0.w_0"] - m["embedding_0.w_0"]).max() > 1e-4


@pytest.mark.parametrize("case,kind,drop_last", [
    ("loader_queue", "QueueDataset", False), ("loader_inmemory", "InMemoryDataset", False),
    ("loader_inmemory_drop", "InMemoryDataset", True)])
def test_dataloader_from_dataset_batches_equal_fluids(data, case, kind, drop_last):
    _, _, variables, _ = model.build(fluid)
    ds = make_dataset(kind, variables, data["files"][:1], batch_size=5)
    steps = list(fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], drop_last))
    want = ORACLE[case]
    assert len(steps) == len(want)
    for step, exp in zip(steps, want):
        assert len(step) == 1
        for name in model.SLOTS:
            tensor = step[0][name]
            np.testing.assert_array_equal(np.array(tensor).reshape(exp[name]["data"].shape),
                                          exp[name]["data"])
            assert list(np.array(tensor).shape) == list(exp[name]["data"].shape)
            if name in ("c1", "c2"):  # fluid gives the dense slots a LoD too; spmd only these
                assert tensor.lod() == exp[name]["lod"]


def test_data_generator_writes_fluids_text(data):
    with open(data["raw"][0]) as f:
        out = subprocess.run(data["pipe"].split(), stdin=f, capture_output=True, text=True,
                             check=True, timeout=60).stdout
    assert out == ORACLE["generated_a"]


def test_data_feed_desc_reads_and_writes_fluids_text(tmp_path):
    case = ORACLE["data_feed_desc"]
    path = tmp_path / "data.proto"
    path.write_text(case["proto"])
    desc = fluid.DataFeedDesc(str(path))
    assert desc.desc() == case["before"]
    desc.set_batch_size(128)
    desc.set_dense_slots(["words"])
    desc.set_use_slots(["words", "weight"])
    assert desc.desc() == case["after"]
    with pytest.raises(ValueError, match="no slot named 'nope'"):
        desc.set_use_slots(["nope"])
    path.write_text('name: "MultiSlotDataFeed" batch_size: "two"')
    with pytest.raises(ValueError, match="batch_size takes a int, got \"two\""):
        fluid.DataFeedDesc(str(path))
