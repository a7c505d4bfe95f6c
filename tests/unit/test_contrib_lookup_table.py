"""fluid.contrib.utils.lookup_table_utils: a program trained with a distributed lookup table
(the pservers hold it) converted back to local lookups runs inference in one process with the
numbers of the untranspiled program; the table merged from the blocks the pservers saved;
a pserver's slices of every parameter loaded for incremental training."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.contrib.utils import lookup_table_utils as ltu

EPS = "127.0.0.1:6170,127.0.0.1:6171"
ROWS, WIDTH = 40, 1000  # big enough for the transpiler to cut the table into two blocks


def _net(distributed=True, train=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data("ids", [None, 1], "int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [ROWS, WIDTH], is_sparse=True,
                                     is_distributed=distributed, param_attr="table")
        out = fluid.layers.fc(fluid.layers.sequence_pool(emb, "sum"), 2,
                              param_attr="fc_w", bias_attr="fc_b")
        if train:
            fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(out))
    return main, startup, out


def _values():
    r = np.random.default_rng(5)
    return {"table": r.uniform(-1, 1, (ROWS, WIDTH)).astype("float32"),
            "fc_w": r.uniform(-1, 1, (WIDTH, 2)).astype("float32"),
            "fc_b": r.uniform(-1, 1, (2,)).astype("float32")}


def _feed():
    ids = np.array([[3], [17], [3], [39], [0]], "int64")
    return {"ids": fluid.create_lod_tensor(ids, [[2, 3]], fluid.CPUPlace())}


def _transpiled(train=True):
    main, startup, out = _net(train=train)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers=EPS, trainers=1)
    return t, t.get_trainer_program(wait_port=False), out


def _reference():
    main, startup, out = _net(distributed=False)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.core.Scope()):
        exe.run(startup)
        for name, value in _values().items():
            fluid.global_scope().var(name).get_tensor().set(value, fluid.CPUPlace())
        return exe.run(main, feed=_feed(), fetch_list=[out])[0]


def test_converted_program_infers_locally_as_the_untranspiled_one():
    _, trainer, out = _transpiled()
    assert trainer._distributed_lookup_table == "table"
    assert "distributed_lookup_table" in [op.type for op in trainer.global_block().ops]
    converted = ltu.convert_dist_to_sparse_program(trainer)
    ops = converted.global_block().ops
    assert "distributed_lookup_table" not in [op.type for op in ops]
    lookups = [op for op in ops if op.type == "lookup_table"]
    assert len(lookups) == 1 and lookups[0].input("W") == ["table"]
    assert lookups[0].attrs["is_distributed"] is False
    infer = converted._prune_with_input(["ids"], [out])
    assert not {op.type for op in infer.global_block().ops} & {"send", "recv", "prefetch"}
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.core.Scope()):
        for name, value in _values().items():
            fluid.global_scope().var(name).get_tensor().set(value, fluid.CPUPlace())
        got = exe.run(infer, feed=_feed(), fetch_list=[out])[0]
    np.testing.assert_allclose(got, _reference(), rtol=1e-5, atol=1e-5)


def test_convert_without_a_distributed_table_warns_and_gives_none(caplog):
    main, _, _ = _net(distributed=False)
    with caplog.at_level(logging.WARNING, logger="lookup_table_utils"):
        assert ltu.convert_dist_to_sparse_program(main) is None
    assert "no distributed lookup tables" in caplog.text


def _save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for name, value in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), value, allow_pickle=False)


def test_inference_loads_the_persistables_and_merges_the_table_blocks(tmp_path):
    values = _values()
    _, trainer, out = _transpiled()
    converted = ltu.convert_dist_to_sparse_program(trainer)
    infer = converted._prune_with_input(["ids"], [out])
    # what save_persistables and the pservers' checkpoint_notify leave: the dense
    # parameters, and the table's two row blocks on the two pservers
    _save(str(tmp_path), {"fc_w": values["fc_w"], "fc_b": values["fc_b"]})
    _save(str(tmp_path / "pserver_0"), {"table.block0": values["table"][:20]})
    _save(str(tmp_path / "pserver_1"), {"table.block1": values["table"][20:]})
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.core.Scope()):
        program = ltu.load_persistables_for_inference(str(tmp_path), exe, infer, "table")
        assert program is infer
        table = np.array(fluid.global_scope().find_var("table").get_tensor())
        np.testing.assert_array_equal(table, values["table"])
        got = exe.run(infer, feed=_feed(), fetch_list=[out])[0]
    np.testing.assert_allclose(got, _reference(), rtol=1e-5, atol=1e-5)
    merged = np.load(tmp_path / "__lookup_table__" / "table.npy")
    np.testing.assert_array_equal(merged, values["table"])


def test_inference_without_the_table_says_where_it_looked(tmp_path):
    _, trainer, out = _transpiled()
    infer = ltu.convert_dist_to_sparse_program(trainer)._prune_with_input(["ids"], [out])
    values = _values()
    _save(str(tmp_path), {"fc_w": values["fc_w"], "fc_b": values["fc_b"]})
    with fluid.scope_guard(fluid.core.Scope()):
        with pytest.raises(Exception, match="no saved piece of table 'table'"):
            ltu.load_persistables_for_inference(str(tmp_path), fluid.Executor(), infer,
                                                "table")
    with pytest.raises(ValueError, match="There is no directory"):
        ltu.load_persistables_for_inference(str(tmp_path / "nope"), None, infer, "table")


def test_increment_loads_this_pservers_slices(tmp_path):
    values = _values()
    t, _, _ = _transpiled()
    _save(str(tmp_path), {"fc_w": values["fc_w"], "fc_b": values["fc_b"]})
    exe = fluid.Executor(fluid.CPUPlace())
    checked = set()
    for ep in EPS.split(","):
        pserver = t.get_pserver_program(ep)
        pieces = pserver._parameters_on_pservers.get_distributed_vars_by_ep(ep)
        (table,) = [p for p in pieces if p.origin.name == "table"]
        assert table.is_slice, "the table is cut into one block per pserver"
        start = table.offset // WIDTH
        rows = values["table"][start:start + table.slice.shape[0]]
        table_file = tmp_path / f"{table.slice.name}.npy"
        np.save(table_file, rows, allow_pickle=False)
        with fluid.scope_guard(fluid.core.Scope()):
            ltu.load_persistables_for_increment(str(tmp_path), exe, pserver,
                                                table.slice.name, str(table_file))
            scope = fluid.global_scope()
            for p in pieces:
                got = np.array(scope.find_var(p.slice.name).get_tensor())
                whole = values[p.origin.name]
                row = int(np.prod(whole.shape[1:])) if whole.ndim > 1 else 1
                first = p.offset // row
                np.testing.assert_array_equal(got, whole[first:first + p.slice.shape[0]])
                checked.add(p.slice.name)
    assert checked == {"fc_w", "fc_b", "table.block0", "table.block1"}
    with pytest.raises(ValueError, match="There is no file named"):
        ltu.load_persistables_for_increment(str(tmp_path), exe, t.get_pserver_program(
            EPS.split(",")[0]), "table.block0", str(tmp_path / "missing.npy"))
