"""Parameter-server mode at scale: a step costs its rows, not its table.

- A pserver's sync step (PServerRuntime, called as the gRPC server calls it, in this process)
  on a slice of a table cut across 3 pservers writes the looked-up rows of the slice, and of
  lazy Adam's moments, in place: the same arrays before and after, every other row untouched,
  the touched ones by fluid's formulas on the two trainers' averaged rows.
- A job of 3 pservers and 2 trainers (tests/unit/ps_scripts/ps_role.py, model "wide": a
  300000 x 8 table cut into 3 blocks of 100000 rows, one per pserver) with SGD and lazy Adam
  equals one process fed the whole batch, and each trainer's step moves rows, not the table
  (spmd.ps.rpc.client_rows / client_bytes: the rows and bytes it sent and received).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from ps_jobs import assemble, run_job, run_local

import spmd.fluid as fluid
from spmd.core.selected_rows import SelectedRows

pytest.importorskip("grpc")
pytestmark = pytest.mark.timeout(120)

ROWS, DIM, LR = 300_000, 8, 0.5
EPS = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]


def _pserver(opt: str):
    """The runtime of pserver 0 of a 3-pserver, 2-trainer transpile, its startup run."""
    from spmd.ps.pserver import PServerRuntime

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.data("ids", [None, 1], "int64")
        y = fluid.data("y", [None, 1], "float32")
        emb = fluid.layers.embedding(ids, size=[ROWS, DIM], is_sparse=True)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(emb, 1), y))
        if opt == "sgd":
            fluid.optimizer.SGD(LR).minimize(loss)
        else:
            fluid.optimizer.Adam(LR, lazy_mode=True).minimize(loss)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=",".join(EPS), trainers=2, startup_program=startup)
    blocks = t.param_blocks()["embedding_0.w_0"]
    assert [(b[1], b[2], b[3]) for b in blocks] == [
        (0, 100000, EPS[0]), (100000, 200000, EPS[1]), (200000, 300000, EPS[2])]
    prog, pstartup = t.get_pserver_programs(EPS[0])
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(pstartup, scope=scope)
    values = {n: scope.get(n) for n in prog.global_block().vars if scope.get(n) is not None}
    op = prog.global_block().ops[-1]
    # the pserver alone holds its values, as exe.run(pserver_program) takes them out of the
    # scope while it serves (a value someone else holds is never written in place)
    return PServerRuntime(prog, op, values, fluid.CPUPlace()), values


def _step(runtime, grads):
    """Both trainers send their gradients of step 0 and meet at its send barrier."""
    for i, g in enumerate(grads):
        runtime.send_variables(i, 0, g)
    errors = []

    def arrive(i):
        try:
            runtime.barrier(i, "send", 0, 20.0)
        except Exception as e:  # noqa: BLE001 - the test reads it
            errors.append(e)

    threads = [threading.Thread(target=arrive, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors, errors


def _grads(rng):
    """Two trainers' gradients: table rows (repeats included) and the fc bias."""
    rows = [np.array([5, 99_999, 5, 17]), np.array([17, 0])]
    out = []
    for i, r in enumerate(rows):
        out.append({f"embedding_0.w_0@GRAD.block0.trainer_{i}": SelectedRows(
            r, rng.standard_normal((len(r), DIM)).astype("float32"), 100_000),
            f"fc_0.b_0@GRAD.trainer_{i}": rng.standard_normal(1).astype("float32")})
    return rows, out


def _averaged_rows(rows, grads) -> dict:
    """{row: the trainers' summed values / 2} (the pserver's sum then scale)."""
    total: dict = {}
    for i, r in enumerate(rows):
        value = grads[i][f"embedding_0.w_0@GRAD.block0.trainer_{i}"].value
        for k, row in enumerate(r):
            total[int(row)] = total.get(int(row), 0) + value[k].astype(np.float64)
    return {row: v / 2 for row, v in total.items()}


@pytest.mark.parametrize("opt", ["sgd", "lazy_adam"])
def test_a_pserver_step_writes_the_rows_of_its_slice_in_place(opt):
    runtime, values = _pserver(opt)
    assert values["embedding_0.w_0.block0"].shape == (100_000, DIM)
    names = ["embedding_0.w_0.block0"] + [
        n for n in ("embedding_0.w_0_moment1_0", "embedding_0.w_0_moment2_0") if n in values]
    before = {n: values[n].copy() for n in names}
    identity = {n: id(values[n]) for n in names}  # no reference kept: it would block the loan
    rows, grads = _grads(np.random.default_rng(0))
    _step(runtime, grads)
    for n in names:  # the same arrays: written in place, never copied
        assert id(runtime.values[n]) == identity[n], n
    assert runtime.lent_total() >= len(names)
    held = {n: runtime.values[n] for n in names}
    table = held["embedding_0.w_0.block0"]
    g = _averaged_rows(rows, grads)
    touched = sorted(g)
    untouched = np.setdiff1d(np.arange(100_000), touched)
    for n, a in held.items():
        np.testing.assert_array_equal(a[untouched], before[n][untouched], err_msg=n)
    p0 = before["embedding_0.w_0.block0"][touched].astype(np.float64)
    gv = np.stack([g[r] for r in touched])
    if opt == "sgd":
        want = p0 - LR * gv
    else:  # fluid 1.8's adam_op.h on the merged rows, first step (beta pows 0.9, 0.999)
        # the betas as the float32 program holds them (1 - beta2 in float32 is 1.3e-5 off)
        b1, b2, eps = float(np.float32(0.9)), float(np.float32(0.999)), 1e-8
        m1 = (1 - b1) * gv
        m2 = (1 - b2) * gv * gv
        lr_t = LR * np.sqrt(1 - b2) / (1 - b1)
        want = p0 - lr_t * (m1 / (np.sqrt(m2) + eps))
        np.testing.assert_allclose(values["embedding_0.w_0_moment1_0"][touched], m1,
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(values["embedding_0.w_0_moment2_0"][touched], m2,
                                   rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(table[touched], want, rtol=1e-5, atol=1e-6)


def test_two_blocks_of_a_table_on_one_pserver_keep_their_own_adam_state(tmp_path):
    """HashName puts both blocks of the 2-pserver table on pserver 0 (crc32 of their names):
    each block's lazy Adam has its own moments and beta powers there, its gradients are sent
    where it is, and the job equals one process."""
    args = ["--model", "wide", "--opt", "lazy_adam", "--steps", "3", "--hash"]
    out = run_job(tmp_path, args, pservers=2)
    assert {"embedding_0.w_0.block0", "embedding_0.w_0.block1",
            "embedding_0.w_0_moment1_0.block0", "embedding_0.w_0_moment1_0.block1",
            "embedding_0.w_0_beta1_pow_acc_0.block1"} <= set(out["ps0.init"])
    init = assemble(out["ps0.init"], out["ps1.init"])
    names = ["embedding_0.w_0", "fc_0.w_0", "fc_0.b_0"]
    local = run_local(tmp_path, init, args, names)
    final = assemble(out["ps0"], out["ps1"])
    for name in names:
        np.testing.assert_allclose(final[name], local[name], rtol=1e-5, atol=1e-6,
                                   err_msg=f"pservers' {name} vs one process")
    np.testing.assert_allclose(out["ps0"]["embedding_0.w_0_beta1_pow_acc_0.block0"],
                               [0.9 ** 4], rtol=1e-6)  # advanced once a step, from 0.9


@pytest.mark.parametrize("opt", ["sgd", "lazy_adam"])
def test_three_pservers_and_a_sliced_table_equal_one_process_moving_only_rows(tmp_path, opt):
    args = ["--model", "wide", "--opt", opt, "--steps", "3"]
    out = run_job(tmp_path, args, pservers=3)
    inits = [out[f"ps{i}.init"] for i in range(3)]
    for i, init in enumerate(inits):  # one block of 100000 rows on each pserver
        assert init[f"embedding_0.w_0.block{i}"].shape == (100_000, DIM)
    init = assemble(*inits)
    local = run_local(tmp_path, init, args, ["embedding_0.w_0", "fc_0.w_0", "fc_0.b_0"])
    final = assemble(*(out[f"ps{i}"] for i in range(3)))
    for name in ("embedding_0.w_0", "fc_0.w_0", "fc_0.b_0"):
        np.testing.assert_allclose(final[name], local[name], rtol=1e-5, atol=1e-6,
                                   err_msg=f"pservers' {name} vs one process")
    moved = np.abs(final["embedding_0.w_0"] - init["embedding_0.w_0"]).max(axis=1) > 0
    assert 0 < moved.sum() <= 3 * 16  # the looked-up rows only (16 ids a step)
    np.testing.assert_allclose((out["t0"]["losses"] + out["t1"]["losses"]) / 2,
                               local["losses"], rtol=1e-5)
    table_bytes = ROWS * DIM * 4
    for t in ("t0", "t1"):
        # per step: 8 table rows (its ids) + fc_0.w_0's 8 rows + fc_0.b_0's 1 sent;
        # the two dense ones received and its ids' rows prefetched
        rows_sent, rows_prefetched = out[t]["rows_sent"], out[t]["rows_prefetched"]
        assert (rows_sent == 8 + 8 + 1).all(), rows_sent
        assert (rows_prefetched <= 8).all() and (rows_prefetched >= 1).all(), rows_prefetched
        assert (out[t]["rows_received"] == rows_prefetched + 8 + 1).all()
        assert (out[t]["bytes_sent"] < table_bytes / 1000).all(), out[t]["bytes_sent"]
        assert (out[t]["bytes_received"] < table_bytes / 1000).all()


def test_a_sparse_gradient_handed_back_is_its_dense_table():
    """What exe.run(pserver_program) writes back to the scope for a sparse gradient (and a
    checkpoint saves): its dense table, repeated rows summed, in memory its rows take."""
    from spmd.ps.pserver import rows_backed_dense

    rng = np.random.default_rng(1)
    g = SelectedRows(np.array([3, 9, 3]), rng.standard_normal((3, DIM)).astype("float32"), 12)
    dense = rows_backed_dense(g)
    np.testing.assert_array_equal(dense, g.to_dense(np))
    assert dense.shape == (12, DIM) and dense.dtype == np.float32 and dense.flags.writeable
    assert rows_backed_dense(SelectedRows(np.zeros(0, np.int64),
                                          np.zeros((0, DIM), "float32"), 0)).shape == (0, DIM)
