"""Sub-blocks, the seam control flow builds on: Program._create_block / _rollback put the ops a
layer appends into a sub-block that reads its ancestors' variables; programs with sub-blocks
clone and serialize whole; a plan runs a sub-block on the values its caller gives, with the
caller's generators, and frees only the sub-block's own temporaries."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import ExecutionError, NotFoundError
from spmd.executor.plan import Plan


def program_with_body():
    """main: y = x * 3; block 1 (the body): t = y + x (t local), out = relu(t) * 2, where
    `out` is declared in the global block, as a control-flow op's output is."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3], "float64")
        y = fluid.layers.scale(x, 3.0)
        out = main.global_block().create_var(name="out", shape=[-1, 3], dtype="float64")
        body = main._create_block()
        t = fluid.layers.elementwise_add(y, x)
        r = fluid.layers.scale(fluid.layers.relu(t), 2.0)
        fluid.layers.assign(r, out)
        main._rollback()
        after = fluid.layers.scale(y, 1.0)
    return main, body, x, y, t, out, after


def test_ops_built_inside_go_to_the_sub_block_and_read_the_parent():
    main, body, x, y, t, out, after = program_with_body()
    assert main.num_blocks == 2 and body.parent_idx == 0
    assert main.current_block() is main.global_block()
    assert [op.type for op in body.ops] == ["elementwise_add", "relu", "scale", "assign"]
    assert "scale" in [op.type for op in main.global_block().ops]
    assert t.name in body.vars and t.name not in main.global_block().vars
    assert body._var_recursive(x.name) is main.global_block().var(x.name)
    with pytest.raises(NotFoundError, match=f"'{t.name}' is not in block 0"):
        main.global_block()._var_recursive(t.name)  # a body's variable is not the parent's
    with pytest.raises(NotFoundError, match="nor any block enclosing it"):
        body._var_recursive("nowhere")


def test_clone_and_serialization_keep_every_block():
    main = program_with_body()[0]
    for copy in (main.clone(), fluid.Program.parse_from_string(main.serialize_to_string())):
        assert copy.num_blocks == 2 and copy.block(1).parent_idx == 0
        assert [op.type for op in copy.block(1).ops] == [op.type for op in main.block(1).ops]
        assert copy.fingerprint() == main.fingerprint()
    other = program_with_body()[0]
    other.block(1).ops[2].set_attr("scale", 5.0)
    assert other.fingerprint() != main.fingerprint()  # a body's ops count in the fingerprint


def test_a_plan_runs_the_sub_block_on_the_callers_values():
    main, body, x, y, t, out, after = program_with_body()
    xv = np.arange(-3.0, 3.0).reshape(2, 3)
    env = {x.name: xv, y.name: xv * 3}
    plan = Plan(main, [x.name], [out.name], np.random.default_rng(0))
    got = plan.run_block(1, env, np)
    assert got is env
    np.testing.assert_allclose(env[out.name], np.maximum(xv * 4, 0) * 2)
    # the caller's values stay; the body's own temporaries are freed
    assert x.name in env and y.name in env and t.name not in env
    assert plan.sub_plan(1) is plan.sub_plan(1)  # compiled once


def test_the_global_plan_runs_only_the_global_block():
    main, body, x, y, t, out, after = program_with_body()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    xv = np.ones((2, 3))
    (a,) = exe.run(main, feed={x.name: xv}, fetch_list=[after], scope=scope)
    np.testing.assert_allclose(a, xv * 3)


def test_a_sub_block_missing_a_value_names_the_op():
    main, body, x, y, t, out, after = program_with_body()
    plan = Plan(main, [], [], None).sub_plan(1)
    with pytest.raises(ExecutionError, match="elementwise_add"):
        plan.run_in({x.name: np.ones((2, 3))}, np)
