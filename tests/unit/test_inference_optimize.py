"""py_reader's ops in the program and Program._inference_optimize as fluid 1.8's
(tests/oracle/make_inference_optimize.py): the main program lists create_double_buffer_reader
and read, the startup program create_py_reader; _inference_optimize keeps every op (backward
and optimizer ones too), drops the ops up to `read` and the READER variables with
prune_read_op, and sets is_test; the program still trains from its reader."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_inference_optimize import build
from oracle_io import load

import spmd.fluid as fluid

CASES = load("inference_optimize")
_SAME = {"cross_entropy_grad2": "cross_entropy2_grad"}  # spmd's name of that grad op


def _ops(program):
    return [op.type for op in program.global_block().ops]


def _fluid(names):
    return [_SAME.get(n, n) for n in names]


@pytest.mark.parametrize("kind", ["double", "single"])
def test_reader_ops_and_inference_optimize_as_fluid(kind):
    want = CASES[kind]
    main, startup, _, _ = build(fluid, kind == "double")
    assert _ops(main) == _fluid(want["main"])
    assert _ops(startup).count("create_py_reader") == 1
    no_read = main._inference_optimize()
    keep_read = main._inference_optimize(prune_read_op=False)
    assert _ops(no_read) == _fluid(want["no_read"])
    assert _ops(keep_read) == _fluid(want["keep_read"])
    readers = sorted(n for n, v in no_read.global_block().vars.items()
                     if v.type == fluid.core.VarDesc.VarType.READER)
    assert readers == want["no_read_readers"]
    assert [op.attr("is_test") for op in no_read.global_block().ops
            if op.type == "dropout"] == want["dropout_is_test"]
    assert _ops(main) == _fluid(want["main"])  # the program itself is left as it was


def test_a_py_reader_program_with_its_reader_ops_trains():
    main, startup, reader, loss = build(fluid, True)
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((4, 10)).astype("float32"),
                rng.integers(0, 2, (4, 1)).astype("int64")) for _ in range(3)]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    losses = []
    with fluid.scope_guard(scope):
        exe.run(startup)
        reader.decorate_tensor_provider(lambda: iter(batches))
        reader.start()
        try:
            while True:
                losses.append(float(exe.run(main, fetch_list=[loss])[0][0]))
        except fluid.core.EOFException:
            reader.reset()
    assert len(losses) == 3 and all(np.isfinite(losses))
