"""Large tables (issue 24): initialising a table (uniform, normal, xavier, truncated normal)
makes no float64
temporary of its size and gives the values of one whole draw; save and load stream it (no
second copy of the table: tracemalloc counts numpy's buffers); training after a load keeps
updating the table in place."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.io as spmd_io
from spmd.errors import InvalidArgumentError
from spmd.kernels.context import KernelContext
from spmd.kernels.random import FILL_CHUNK
from spmd.kernels.registry import run_kernel

ROWS, DIM = 2 * FILL_CHUNK // 16 + 123, 16  # a little over two chunks, not a multiple


def _peak(fn):
    """(fn()'s result, the peak of numpy allocations while it ran, in bytes)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _truncated_whole(g):
    """fluid's truncated normal as one array: drawn, then redrawn outside +-2 in rounds."""
    z = g.standard_normal(size=(ROWS, DIM))
    bad = np.abs(z) > 2.0
    while bad.any():
        z[bad] = g.standard_normal(size=int(bad.sum()))
        bad = np.abs(z) > 2.0
    return 0.1 + 0.2 * z


DRAWS = {
    "uniform_random": ({"min": -0.3, "max": 0.7, "diag_num": 0, "diag_step": 0,
                        "diag_val": 1.0}, lambda g: g.uniform(-0.3, 0.7, size=(ROWS, DIM))),
    "gaussian_random": ({"mean": 0.1, "std": 0.2}, lambda g: g.normal(0.1, 0.2, size=(ROWS, DIM))),
    "truncated_gaussian_random": ({"mean": 0.1, "std": 0.2}, _truncated_whole),
}


@pytest.mark.parametrize("op", sorted(DRAWS))
def test_a_large_random_table_is_one_draw_made_without_a_float64_copy(op):
    attrs, whole_draw = DRAWS[op]
    attrs = dict(attrs, shape=[ROWS, DIM], dtype="float32", seed=0)
    ctx = KernelContext(rng=np.random.default_rng(21))
    out, peak = _peak(lambda: run_kernel(op, np, {}, attrs, {"Out"}, ctx)["Out"])
    assert out.dtype == np.float32 and out.shape == (ROWS, DIM)
    np.testing.assert_array_equal(out, whole_draw(np.random.default_rng(21)).astype("float32"))
    table = ROWS * DIM * 4
    # the table and a chunk's scratch (the truncated normal: its mask and the indices to
    # redraw, about 4.6% of the elements, too)
    assert peak <= table + 3 * FILL_CHUNK * 8 + table // 10, (peak, table)


@pytest.mark.parametrize("init", ["uniform", "normal", "xavier", "truncated"])
def test_initialising_a_table_costs_the_table_and_one_chunk(init):
    make = {"uniform": lambda: fluid.initializer.Uniform(-0.1, 0.1),
            "normal": lambda: fluid.initializer.Normal(0.0, 0.1),
            "xavier": lambda: fluid.initializer.Xavier(),
            "truncated": lambda: fluid.initializer.TruncatedNormal(0.0, 0.1)}[init]
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.data("ids", [None, 1], "int64")
        fluid.layers.embedding(ids, size=[ROWS, DIM], is_sparse=True,
                               param_attr=fluid.ParamAttr(name="table", initializer=make()))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    _, peak = _peak(lambda: exe.run(start, scope=scope))
    table = np.asarray(scope.find_var("table").get_tensor())
    assert table.shape == (ROWS, DIM) and table.dtype == np.float32 and table.std() > 0
    assert peak <= ROWS * DIM * 4 * 11 // 10 + 3 * FILL_CHUNK * 8 + (1 << 20), peak


def _sparse_model(vocab, dim):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 2
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[vocab, dim], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name="table"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(emb, 3), y))
        fluid.optimizer.Adam(0.05, lazy_mode=True).minimize(loss)
    return main, start, loss


@pytest.mark.parametrize("filename", [None, "all.npz"])
def test_save_and_load_stream_the_table(tmp_path, filename):
    vocab, dim = 200_000, 32  # 25.6 MB a table, three with lazy adam's moments
    main, start, loss = _sparse_model(vocab, dim)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    rng = np.random.default_rng(3)
    feeds = [{"ids": rng.integers(0, vocab, size=(16, 1)), "y": rng.integers(0, 3, size=(16, 1))}
             for _ in range(4)]
    table = vocab * dim * 4
    with fluid.scope_guard(scope):
        exe.run(start)
        for feed in feeds[:2]:
            exe.run(main, feed=feed, fetch_list=[loss])
        _, saved = _peak(lambda: fluid.io.save_persistables(exe, str(tmp_path), main,
                                                             filename=filename))
        want = {n: np.array(scope.find_var(n).get_tensor()) for n in ("table",)}
        exe.run(main, feed=feeds[2], fetch_list=[loss])  # moves on, then back to the save
        _, loaded = _peak(lambda: fluid.io.load_persistables(exe, str(tmp_path), main,
                                                             filename=filename))
        np.testing.assert_array_equal(np.asarray(scope.find_var("table").get_tensor()),
                                      want["table"])
        (after_load,) = exe.run(main, feed=feeds[3], fetch_list=[loss])
    # a .npy file is written from the array itself (the rest: reading it back for its
    # CRC, a chunk at a time); an archive member through numpy's
    # buffered copy of 16 MiB at a time, whatever the table's size
    bound = (4 << 20) if filename is None else (17 << 20)
    assert saved < bound, f"save's peak allocation {saved} B, a table is {table} B"
    # each large array (a .npy file, an archive's member) read straight into the scope's own
    assert loaded < (4 << 20), f"load's peak {loaded} B, a table is {table} B"
    assert np.isfinite(after_load).all()


def test_a_load_never_writes_into_an_array_a_user_holds(tmp_path):
    vocab, dim = 300_000, 16  # 19.2 MB: loaded in place when nothing else holds it
    main, start, loss = _sparse_model(vocab, dim)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    feed = {"ids": np.array([[1], [5]]), "y": np.array([[0], [2]])}
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.io.save_persistables(exe, str(tmp_path), main)
        exe.run(main, feed=feed, fetch_list=[loss])
        held = np.asarray(scope.find_var("table").get_tensor())  # the scope's own array
        trained = held.copy()
        fluid.io.load_persistables(exe, str(tmp_path), main)
        loaded = np.asarray(scope.find_var("table").get_tensor())
    np.testing.assert_array_equal(held, trained)  # what the user holds did not change
    assert not np.shares_memory(held, loaded)
    assert not np.array_equal(loaded[[1, 5]], trained[[1, 5]])  # the saved rows came back


def _member_data_start(path) -> int:
    """Where the bytes of member table.npy begin in the archive `path`."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo("table.npy").header_offset
    with open(path, "rb") as f:
        f.seek(offset)
        local = f.read(30)  # a zip local file header: name and extra lengths at 26 and 28
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return offset + 30 + name_len + extra_len


@pytest.mark.parametrize("filename", [None, "all.npz"])
def test_a_damaged_file_changes_no_table_loaded_in_place(tmp_path, filename):
    vocab, dim = 300_000, 16
    main, start, loss = _sparse_model(vocab, dim)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    feed = {"ids": np.array([[1], [5]]), "y": np.array([[0], [2]])}
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.io.save_persistables(exe, str(tmp_path), main, filename=filename)
        exe.run(main, feed=feed, fetch_list=[loss])
        before = {n: np.array(scope.find_var(n).get_tensor())
                  for n in scope.local_var_names() if n.startswith("table")}
        if filename is None:  # the manifest's CRC-32 finds it
            path, at = spmd_io.var_path(str(tmp_path), "table"), -7
        else:  # without the manifest, the member's own CRC-32 (zipfile's) must
            (tmp_path / ".spmd-manifest.json").unlink()
            path, at = str(tmp_path / filename), _member_data_start(tmp_path / filename) + 999
        with open(path, "r+b") as f:  # one byte of the table's data flipped
            f.seek(at, 0 if at >= 0 else 2)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0xFF]))
        with pytest.raises(InvalidArgumentError, match="CRC-32" if filename is None else "damaged"):
            fluid.io.load_persistables(exe, str(tmp_path), main, filename=filename)
        after = {n: np.array(scope.find_var(n).get_tensor()) for n in before}
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_fluid_save_and_load_stream_the_table(tmp_path):
    vocab, dim = 300_000, 16  # 19.2 MB a table, three with lazy adam's moments
    main, start, loss = _sparse_model(vocab, dim)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    feed = {"ids": np.array([[1], [5]]), "y": np.array([[0], [2]])}
    with fluid.scope_guard(scope):
        exe.run(start)
        exe.run(main, feed=feed, fetch_list=[loss])
        fluid.save(main, str(tmp_path / "step"))
        want = np.array(scope.find_var("table").get_tensor())
        exe.run(main, feed=feed, fetch_list=[loss])
        _, peak = _peak(lambda: fluid.load(main, str(tmp_path / "step"), exe))
        np.testing.assert_array_equal(np.asarray(scope.find_var("table").get_tensor()), want)
    assert peak < (4 << 20), f"load's peak {peak} B, a table is {vocab * dim * 4} B"


@pytest.mark.parametrize("dtype", ["float64", "float16"])
@pytest.mark.parametrize("op", ["uniform_random", "gaussian_random"])
def test_a_large_draw_in_another_float_dtype_is_the_whole_draw_cast(op, dtype):
    # the chunked fill rounds each float64 value once, straight into the output's dtype
    attrs, whole_draw = DRAWS[op]
    attrs = dict(attrs, shape=[ROWS, DIM], dtype=dtype, seed=0)
    ctx = KernelContext(rng=np.random.default_rng(5))
    out = run_kernel(op, np, {}, attrs, {"Out"}, ctx)["Out"]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, whole_draw(np.random.default_rng(5)).astype(dtype))
