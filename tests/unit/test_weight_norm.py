"""fluid.WeightNormParamAttr: w = g * v / ||v|| from two trained parameters (`<name>_g`,
`<name>_v`); the output, g and v before and after one SGD step equal what fluid 1.8.5 computes
for the same program (tests/oracle/make_weight_norm.py), along every dim; data parallel over
two places trains what one place trains."""
from __future__ import annotations

import numpy as np
import pytest
from oracle.make_weight_norm import DIMS, X, build, run
from oracle_io import load

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

ORACLE = load("weight_norm")


@pytest.mark.parametrize("key", sorted(DIMS))
def test_weight_norm_equals_fluid(key):
    got = run(fluid, DIMS[key])
    for i, (g, w) in enumerate(zip(got, ORACLE[key])):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=f"dim {key} fetch {i}")


def test_weight_starts_equal_to_v_and_g_to_its_norm():
    main, startup, y = build(fluid, 1)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    v = np.array(scope.find_var("w_v").get_tensor())
    g = np.array(scope.find_var("w_g").get_tensor())
    np.testing.assert_allclose(g, np.sqrt((v ** 2).sum(axis=0, keepdims=True)), rtol=1e-6)
    (out,) = exe.run(main.clone(for_test=True), feed={"x": X}, fetch_list=[y], scope=scope)
    np.testing.assert_allclose(out, X @ v, rtol=1e-5)


def test_two_places_train_what_one_place_trains():
    results = []
    for places in (1, 2):
        main, startup, y = build(fluid, 0)
        # the loss is the last reduce_sum (the ones before compute ||v||)
        loss_name = [op for op in main.global_block().ops
                     if op.type == "reduce_sum"][-1].output_arg_names[0]
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        compiled = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss_name, places=[fluid.CPUPlace()] * places)
        # the loss is a sum, and places average their gradients: each place gets the rows the
        # single place gets
        exe.run(compiled, feed={"x": np.tile(X, (places, 1))}, fetch_list=[y], scope=scope)
        results.append([np.array(scope.find_var(n).get_tensor()) for n in ("w_g", "w_v")])
    for one, two in zip(*results):
        np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-7)


def test_dim_out_of_range_is_a_clear_error():
    with pytest.raises(InvalidArgumentError, match=r"dim=2\) is out of range"):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.layers.data("x", [3])
            fluid.layers.fc(x, 4, param_attr=fluid.WeightNormParamAttr(dim=2))
