"""fluid.io.PyReader, fluid.layers.py_reader / create_py_reader_by_data / read_file /
double_buffer, and the load op (fluid.layers.load)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from tests.oracle_io import load

SAMPLES = [(np.full(3, i, "float32"), np.array([i % 2], "int64")) for i in range(10)]


def run_epoch(exe, main, fetch, scope) -> list:
    out = []
    try:
        while True:
            out.append(exe.run(main, fetch_list=[fetch], scope=scope)[0])
    except fluid.core.EOFException:
        return out


def test_pyreader_non_iterable_sample_list_generator():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[3])
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        reader = fluid.io.PyReader(feed_list=[x, y], capacity=2, iterable=False)
        total = fluid.layers.reduce_sum(x)
    reader.decorate_sample_list_generator(paddle.batch(lambda: iter(SAMPLES), 4))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    for _ in range(2):
        reader.start()
        sums = run_epoch(exe, main, total, scope)
        reader.reset()
        assert [float(s.reshape(-1)[0]) for s in sums] == [18.0, 66.0, 51.0]


def test_pyreader_iterable_sample_generator():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        reader = fluid.io.PyReader(feed_list=[x, y], capacity=2, iterable=True)
    reader.decorate_sample_generator(lambda: iter(SAMPLES), batch_size=3,
                                     places=fluid.CPUPlace())
    steps = list(reader())
    assert len(steps) == 3  # drop_last=True drops the 10th sample
    assert steps[1][0]["x"][:, 0].tolist() == [3.0, 4.0, 5.0]


@pytest.mark.parametrize("by_data", [False, True])
def test_layers_py_reader_read_file(by_data):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        if by_data:
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            reader = fluid.layers.create_py_reader_by_data(capacity=4, feed_list=[x, y])
        else:
            reader = fluid.layers.py_reader(capacity=4, shapes=[[-1, 3], [-1, 1]],
                                            dtypes=["float32", "int64"])
        reader = fluid.layers.double_buffer(reader)
        img, label = fluid.layers.read_file(reader)
        assert img.shape == (-1, 3) and label.dtype == "int64"
        pred = fluid.layers.fc(img, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
        fluid.optimizer.SGD(0.1).minimize(loss)

    def batches():
        for i in range(0, 10, 5):
            xs, ys = zip(*SAMPLES[i:i + 5])
            yield [np.stack(xs), np.stack(ys)]

    reader.decorate_tensor_provider(batches)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    reader.start()
    losses = run_epoch(exe, main, loss, scope)
    reader.reset()
    assert len(losses) == 2 and all(np.isfinite(v).all() for v in losses)


def test_reader_names_match_fluid():
    want = load("reader")["py_reader_names"]
    got = {}
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        for double in (True, False):
            for name in (None, f"train_{int(double)}"):
                reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 1)], dtypes=["float32"],
                                                name=name, use_double_buffer=double)
                kind = "named" if name else "unnamed"
                got[f"py_reader_{kind}_double{int(double)}"] = reader.name
        a = fluid.data(name="a", shape=[None, 1], dtype="float32")
        got["by_data_named"] = fluid.layers.create_py_reader_by_data(
            capacity=2, feed_list=[a], name="cr").name
        got["by_data_unnamed"] = fluid.layers.create_py_reader_by_data(
            capacity=2, feed_list=[a]).name
    assert got == want


def test_py_reader_misuse():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        reader = fluid.layers.py_reader(capacity=2, shapes=[[-1, 1]], dtypes=["float32"])
        with pytest.raises(RuntimeError, match="read_file"):
            reader.start()
        fluid.layers.read_file(reader)
        with pytest.raises(RuntimeError, match="already called"):
            fluid.layers.read_file(reader)
        with pytest.raises(ValueError, match="1 dtype"):
            fluid.layers.py_reader(capacity=2, shapes=[[1], [2]], dtypes=["float32"])


def test_load_op_reads_save_vars_files(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = fluid.layers.create_parameter([2, 3], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(0.5))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_vars(exe, str(tmp_path), main, vars=[w])
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        out = prog.global_block().create_var(name="w", shape=[2, 3], dtype="float32",
                                             persistable=True)
        fluid.layers.load(out, str(tmp_path / "w"))
    other = fluid.Scope()
    (got,) = exe.run(prog, fetch_list=[out], scope=other)
    np.testing.assert_array_equal(got, np.full((2, 3), 0.5, "float32"))
    bad = fluid.Program()
    with fluid.program_guard(bad, fluid.Program()):
        v = bad.global_block().create_var(name="v", shape=[1], dtype="float32")
        fluid.layers.load(v, str(tmp_path / "missing"))
    with pytest.raises(Exception, match="missing"):
        exe.run(bad, fetch_list=[v], scope=other)
