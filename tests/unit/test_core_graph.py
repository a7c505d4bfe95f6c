"""fluid.core.Graph / core.Node: the graph of a program (op nodes linked through variable
versions, as fluid's ir::Graph), its attributes and node factories, written back to a program
that runs; CompiledProgram accepts one and fluid.io refuses that (Paddle's
test_io_save_load.py and test_ir_graph.py)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid import core

XV = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3], "float32")
        h = fluid.layers.scale(x, 2.0)
        h = fluid.layers.scale(h, 3.0, bias=1.0)
        y = fluid.layers.relu(h)
    return main, startup, x, y


def test_graph_links_ops_through_variable_versions():
    main, _, x, y = _net()
    graph = core.Graph(main.desc)
    ops = sorted((n for n in graph.nodes() if n.is_op()), key=lambda n: n.id())
    assert [n.name() for n in ops] == ["scale", "scale", "relu"]
    first, second, relu = ops
    assert [v.name() for v in first.inputs] == ["x"]
    assert first.outputs[0] is second.inputs[0]  # the variable version linking them
    assert relu.outputs[0].name() == y.name
    assert relu.outputs[0].node_type() == core.Node.Type.Variable
    assert relu.op().type() == "relu" and first.inputs[0].var().shape() == [-1, 3]


def test_graph_attributes_and_factories():
    graph = core.Graph(core.ProgramDesc())
    assert not graph.has("n")
    graph.set("n", 3)
    assert graph.get_int("n") == 3
    graph.erase("n")
    assert not graph.has("n")
    with pytest.raises(KeyError, match="not set"):
        graph.get_int("n")
    ctrl = graph.create_control_dep_var()
    assert ctrl.name() == "__control_var@0" and ctrl.is_ctrl_var()
    empty = graph.create_empty_node("y", core.Node.Type.Operation)
    assert empty.is_op() and graph.retrieve_node(empty.id()) is empty
    assert {n.name() for n in graph.release_nodes()} == {"__control_var@0", "y"}
    assert not graph.nodes()


def test_a_graph_written_back_runs_without_the_nodes_removed():
    main, startup, x, y = _net()
    graph = core.Graph(main.desc)
    second = sorted((n for n in graph.nodes() if n.is_op()), key=lambda n: n.id())[1]
    # bypass the second scale: relu reads the first scale's output
    relu = next(n for n in graph.nodes() if n.name() == "relu")
    first_out = second.inputs[0]
    old_in = relu.inputs[0]
    relu.op()._rename_input(old_in.name(), first_out.name())
    relu.remove_input(old_in)
    relu.append_input(first_out)
    graph.remove_node(second)
    graph.remove_node(old_in)
    program = graph.to_program()
    assert [op.type for op in program.global_block().ops] == ["scale", "relu"]
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(program, feed={"x": XV}, fetch_list=[y.name])
    np.testing.assert_allclose(got, np.maximum(2 * XV, 0), rtol=1e-6)


def test_compiled_program_of_a_graph_runs_and_io_refuses_it():
    main, startup, x, y = _net()
    compiled = fluid.CompiledProgram(core.Graph(main.desc))
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(compiled, feed={"x": XV}, fetch_list=[y.name])
    np.testing.assert_allclose(got, np.maximum(6 * XV + 1, 0), rtol=1e-6)
    with pytest.raises(TypeError, match="expected type is Program"):
        fluid.io._get_valid_program(compiled)
    assert fluid.io._get_valid_program(fluid.CompiledProgram(main)) is main
