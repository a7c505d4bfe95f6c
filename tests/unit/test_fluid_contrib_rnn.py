"""fluid.contrib.layers' basic_lstm / basic_gru and their units equal fluid 1.8.5: the same
parameter names, forward outputs (bidirectional, stacked, padding masked by sequence_length,
initial states given or zeros) and the losses and parameters of three SGD steps."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from oracle_io import load

import spmd.fluid as fluid

STORED = load("contrib_rnn")  # tests/oracle/make_contrib_rnn.py, run in fluid 1.8.5
_spec = importlib.util.spec_from_file_location(
    "make_contrib_rnn", pathlib.Path(__file__).parents[1] / "oracle" / "make_contrib_rnn.py")


def _maker():
    """The oracle script's own build(), run here against spmd.fluid (it imports paddle at the
    top, so its body is re-executed with spmd's names in its place)."""
    import types

    import spmd.fluid.contrib.layers as contrib

    source = pathlib.Path(_spec.origin).read_text()
    body = source[source.index("B, T, D, H"):source.index("def param_values")]
    module = types.ModuleType("contrib_rnn_case")
    module.__dict__.update(np=np, fluid=fluid, BasicGRUUnit=contrib.BasicGRUUnit,
                           BasicLSTMUnit=contrib.BasicLSTMUnit, basic_gru=contrib.basic_gru,
                           basic_lstm=contrib.basic_lstm)
    exec(compile(body, _spec.origin, "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", sorted(STORED))
def test_forward_and_training_equal_fluid(name):
    want = STORED[name]
    maker = _maker()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs, loss = maker.build(want["case"])
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.5).minimize(loss)
    assert sorted(p.name for p in main.global_block().all_parameters()) == sorted(
        want["params"])
    assert [list(o.shape) for o in outs] == want["shapes"]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for pname, value in want["params"].items():
            scope.find_var(pname).get_tensor().set(value, fluid.CPUPlace())
        feed = maker.feeds(want["case"])
        got = exe.run(test, feed=feed, fetch_list=[o.name for o in outs])
        for g, w in zip(got, want["forward"]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        losses = [float(np.asarray(exe.run(main, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
                  for _ in range(3)]
        np.testing.assert_allclose(losses, want["losses"], rtol=1e-5, atol=1e-6)
        for pname, value in want["after"].items():
            np.testing.assert_allclose(np.array(scope.find_var(pname).get_tensor()), value,
                                       rtol=1e-4, atol=1e-6)


def test_lstm_needs_both_initial_states():
    from spmd.fluid.contrib.layers import basic_lstm

    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3, 2], "float32")
        h0 = fluid.data("h0", [1, None, 4], "float32")
        with pytest.raises(ValueError, match="both init_hidden and init_cell"):
            basic_lstm(x, h0, None, hidden_size=4)


def test_contrib_names_are_the_same_objects():
    import spmd.fluid.contrib.layers.rnn_impl as rnn_impl

    assert fluid.contrib.basic_lstm is rnn_impl.basic_lstm
    assert fluid.contrib.layers.BasicGRUUnit is rnn_impl.BasicGRUUnit
