"""The misc fluid surface: name_scope, require_version, in_dygraph_mode, install_check,
log_helper, paddle.compat (against fluid 1.8's results), fluid.core additions and the
fluid.layers.collective helpers (one process; several ranks in tests/dist)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import spmd as paddle
import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, PreconditionError
from spmd.fluid.layers import collective
from tests.oracle_io import load


def test_name_scope_sets_op_namescope_as_fluid():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [2], "float32")
        with fluid.name_scope("s1"):
            a = fluid.layers.scale(x, 2.0)
            with fluid.name_scope("s2"):
                b = fluid.layers.scale(a, 2.0)
        with fluid.name_scope("s1"):
            fluid.layers.scale(b, 2.0)
    scopes = [op.attr("op_namescope") for op in main.global_block().ops]
    assert scopes == ["/s1/", "/s1/s2/", "/s1_1/"]  # fluid 1.8's strings
    with pytest.raises(InvalidArgumentError, match="non-empty"), fluid.name_scope(""):
        pass


def test_require_version_and_in_dygraph_mode():
    assert fluid.in_dygraph_mode() is False
    fluid.require_version("1.8.0")
    fluid.require_version("0.1.0", "10.0.0")
    fluid.require_version("1.8")
    with pytest.raises(PreconditionError, match="1.9.0 or higher is required, but 1.8.5"):
        fluid.require_version("1.9.0")
    with pytest.raises(PreconditionError, match=r"in \[1.8.0, 1.7\] required"):
        fluid.require_version("1.8.0", "1.7")
    with pytest.raises(TypeError, match="must be str"):
        fluid.require_version(1)
    with pytest.raises(ValueError, match="format"):
        fluid.require_version("1.x")


def test_install_check_runs(capsys):
    fluid.install_check.run_check()
    out = capsys.readouterr().out
    assert "Your Paddle Fluid is installed successfully!" in out
    assert "MUTIPLE" in out and "SINGLE" in out


def test_log_helper_logger_does_not_propagate():
    logger = fluid.log_helper.get_logger("spmd_test_log", logging.WARNING,
                                         fmt="%(levelname)s: %(message)s")
    assert logger.level == logging.WARNING and logger.propagate is False
    record = logging.LogRecord("spmd_test_log", logging.WARNING, __file__, 1, "hi", None, None)
    assert logger.handlers[-1].format(record) == "WARNING: hi"  # its fmt, by what it writes


def test_compat_matches_fluid():
    want = load("misc")["compat"]
    cpt = paddle.compat
    assert cpt.to_text([b"a", "b"]) == want["to_text"]
    assert [b.decode("latin-1") for b in cpt.to_bytes(["x", b"y"])] == want["to_bytes"]
    assert [cpt.round(x) for x in (0.5, 1.5, -0.5, 2.675)] == want["round"]
    assert cpt.round(2.675, 2) == want["round_d"]
    assert [cpt.floor_division(7, 2), cpt.floor_division(-7, 2)] == want["floor_division"]
    assert cpt.get_exception_message(ValueError("bad value")) == want["exc"]
    assert cpt.to_text({b"k": b"v"}) == {"k": "v"} and cpt.long_type is int
    items = [b"q"]
    assert cpt.to_text(items, inplace=True) is items and items == ["q"]


def test_core_names():
    assert fluid.core.get_cuda_device_count() >= 0
    assert fluid.core.is_compiled_with_mkldnn() is False
    assert issubclass(fluid.core.EOFException, Exception)
    assert fluid.core.VarDesc.VarType.FP32 is not None


def test_layers_collective_helpers_on_one_rank():
    from spmd.fluid.layers import collective as again

    assert again is collective and fluid.layers.collective is collective
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.data("x", [3], "float32")
        total = collective._c_allreduce(x)
        legacy = collective._allreduce(x)
        same = collective._c_broadcast(fluid.layers.scale(x, 1.0), root=0)
        collective._c_sync_comm_stream(same, 0)
        collective._broadcast(same, 0)
        biggest = collective._c_allreduce(x, reduce_type="max")
        product = collective._allreduce(x, reduce_type="prod")
        with pytest.raises(InvalidArgumentError, match="reduce_type must be one of"):
            collective._c_allreduce(x, reduce_type="avg")
    got = fluid.Executor().run(main, feed={"x": np.arange(3, dtype="float32")},
                               fetch_list=[total, legacy, same, biggest, product])
    for value in got:
        np.testing.assert_array_equal(value, [0.0, 1.0, 2.0])
