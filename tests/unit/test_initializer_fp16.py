"""A float16 parameter is initialized as fluid 1.8 initializes it (tests/oracle/
make_initializer_fp16.py): the initializer's op fills a float32 stand-in named
"<prefix>.<param>.tmp_0" and an appended cast writes it into the parameter; the startup
program then gives fluid's float16 values (Paddle's test_initializer.py counts the two ops)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_initializer_fp16 import initializers, startup_of
from oracle_io import load

import spmd.fluid as fluid

CASES = load("initializer_fp16")


@pytest.mark.parametrize("name", sorted(CASES))
def test_float16_parameter_initializes_through_a_float32_stand_in(name):
    want = CASES[name]
    startup = startup_of(fluid, name)
    block = startup.global_block()
    assert [op.type for op in block.ops] == want["ops"]
    cast = block.ops[-1]
    assert [[cast.input("X")[0], cast.output("Out")[0]]] == want["cast"]
    assert block.var(cast.input("X")[0]).dtype == fluid.core.VarDesc.VarType.FP32
    assert cast.attr("in_dtype") == fluid.core.VarDesc.VarType.FP32
    assert cast.attr("out_dtype") == fluid.core.VarDesc.VarType.FP16
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        got = np.array(scope.find_var("p").get_tensor())
    assert got.dtype == np.float16 and list(got.shape) == initializers(fluid)[name][1]
    if "value" in want:
        # fluid's CPU float16 conversion rounds toward zero, numpy's (spmd's cast) to the
        # nearest: the values agree to one float16 step, and fluid's are the truncated ones
        source = _float32_values(name)
        np.testing.assert_array_equal(want["value"], _toward_zero(source))
        np.testing.assert_array_equal(got, source.astype(np.float16))
        step = np.spacing(np.abs(want["value"]).astype(np.float16))
        assert (np.abs(got.astype(np.float32) - want["value"]) <= step).all()
    else:  # a random one: the float32 draw, cast
        assert np.isfinite(got).all() and np.unique(got).size > 1


def _float32_values(name):
    """What the initializer gives a float32 parameter (the stand-in's values)."""
    initializer, shape = initializers(fluid)[name]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        fluid.layers.create_parameter(shape, "float32", name="p",
                                      default_initializer=initializer)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        return np.array(scope.find_var("p").get_tensor())


def _toward_zero(values):
    """float32 -> float16 rounding toward zero (fluid's CPU conversion)."""
    nearest = values.astype(np.float16)
    over = np.abs(nearest.astype(np.float32)) > np.abs(values)
    return np.where(over, np.nextafter(nearest, np.float16(0)), nearest)


def test_a_float32_parameter_keeps_one_op():
    for name in CASES:
        initializer, shape = initializers(fluid)[name]
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            fluid.layers.create_parameter(shape, "float32", name="p",
                                          default_initializer=initializer)
        assert len(startup.global_block().ops) == 1, name
