"""BuildStrategy.debug_graphviz_path writes the compiled data-parallel program as a DOT graph
(and no longer warns that it does nothing): every op a box with its role's colour, every
variable an ellipse, an edge per input and output. It is the last registered pass, so a test
program (no loss) is drawn too."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.passes.registry import PASSES, get_pass
from spmd.passes.strategy import forget_warnings


def test_the_compiled_graph_is_written(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    path = tmp_path / "graph.dot"
    strategy.debug_graphviz_path = str(path)
    forget_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the field acts: no "not acted on" warning
        compiled = fluid.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
        exe.run(compiled, feed={"x": np.ones((4, 3), "float32")}, fetch_list=[loss],
                scope=scope)
    text = path.read_text()
    assert text.startswith("digraph program {") and text.rstrip().endswith("}")
    boxes = re.findall(r'op(\d+) \[label="#\d+ (\w+)', text)
    types = [t for _, t in boxes]
    assert "mul" in types and "sgd" in types
    assert any(t.startswith("c_allreduce") for t in types)  # the data-parallel rewrite's
    assert '"var:fc_0.w_0" -> op' in text and 'style=filled, fillcolor=lightyellow' in text
    assert len(re.findall(r" -> ", text)) >= len(boxes)


def test_an_unwritable_path_is_named(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 3], "float32"), 2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.debug_graphviz_path = str(tmp_path / "missing" / "graph.dot")
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                              build_strategy=strategy)
    with pytest.raises(ValueError, match=r"debug_graphviz_path=.*missing.*cannot write"):
        exe.run(compiled, feed={"x": np.ones((2, 3), "float32")}, scope=scope)


def test_it_is_the_last_registered_pass_and_draws_a_test_program(tmp_path):
    assert get_pass("graphviz").fields == ("debug_graphviz_path",)
    assert PASSES.passes()[-1].name == "graphviz"
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        out = fluid.layers.fc(fluid.data("x", [-1, 3], "float32"), 2)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    strategy = fluid.BuildStrategy()
    strategy.debug_graphviz_path = str(tmp_path / "test.dot")
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        build_strategy=strategy, places=[fluid.CPUPlace()] * 2)
    exe.run(compiled, feed={"x": np.ones((4, 3), "float32")}, fetch_list=[out], scope=scope)
    text = (tmp_path / "test.dot").read_text()
    assert "mul" in text and "c_allreduce" not in text
