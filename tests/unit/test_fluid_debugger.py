"""fluid.debugger, fluid.graphviz and fluid.net_drawer: a program's readable listing, its
Graphviz graphs (DOT files spmd writes), and the NaN/Inf-checked run."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid import debugger, graphviz, net_drawer


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float32")
        y = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(name="w"))
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def test_listing_leaves_out_the_backward_pass_unless_asked():
    main, _, _ = _net()
    text = debugger.pprint_block_codes(main.global_block())
    assert "// operators" in text and "= mul(X=x, Y=w)" in text and "@GRAD" not in text
    full = debugger.pprint_block_codes(main.global_block(), show_backward=True)
    assert "mul_grad" in full
    assert debugger.pprint_program_codes(main).startswith("// block-0")
    assert debugger.repr_var(main.global_block().var("w")) == (
        "Tensor w (tensor(type=float32, shape=[2, 3]))")
    assert debugger.repr_data_type(5) == "float32"
    assert debugger.repr_attr("dtype", 3) == ("dtype=int64", ("dtype", "int64"))


def test_draw_block_graphviz_writes_a_dot_file(tmp_path):
    main, _, _ = _net()
    path = tmp_path / "block.dot"
    debugger.draw_block_graphviz(main.global_block(), highlights=["mul.*"], path=str(path))
    dot = path.read_text()
    assert dot.startswith("digraph G {") and "<<B>mul</B>>" in dot and "orange" in dot
    assert dot.count("->") >= 3


def test_graph_writer():
    g = graphviz.Graph("t", rankdir="LR")
    rank = g.rank_group("same", 1)
    a = g.node("a", prefix="n", rank=rank)
    b = g.node("b", prefix="n", color="red")
    g.edge(a, b, label="x")
    code = g.code()
    assert 'rankdir="LR";' in code and f"{{rank=same;{a.name}}}" in code
    assert f'{a.name} -> {b.name} [label="x"]' in code and 'color="red"' in code
    assert graphviz.crepr("s") == '"s"' and graphviz.crepr(3) == "3"


def test_net_drawer_links_ops_through_their_variables(tmp_path):
    main, startup, _ = _net()
    path = tmp_path / "net.gv"
    g = net_drawer.draw_graph(startup, main, filename=str(path))
    code = path.read_text()
    assert code == g.code() and 'label="X(x)"' in code


def test_nan_inf_debug_run_names_the_op(capsys):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1], "float32")
        y = fluid.layers.log(x)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    before = fluid.get_flags("FLAGS_check_nan_inf")
    try:
        ok = debugger.run_fast_nan_inf_debug(exe, main, feed={"x": np.ones((1, 1), "float32")},
                                             fetch_list=[y])
        assert ok[0][0, 0] == 0.0
        with pytest.raises(Exception, match="log"):
            debugger.run_fast_nan_inf_debug(exe, main, feed={"x": -np.ones((1, 1), "float32")},
                                            fetch_list=[y])
        assert "catch an exception:" in capsys.readouterr().out
    finally:
        fluid.set_flags(before)
