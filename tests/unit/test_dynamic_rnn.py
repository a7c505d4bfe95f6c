"""fluid.layers.DynamicRNN: forward against a numpy recurrence run sequence by sequence
(memories from shape/value and from a reordered init, static inputs, empty sequences),
gradients against central finite differences in float64, the loop kept per iteration only
once a backward pass asks, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

L = fluid.layers
PLACE = fluid.CPUPlace()
RNG = np.random.default_rng(3)
# float32 values (the program holds them as float32 constants cast to float64)
WX = RNG.uniform(-0.7, 0.7, (3, 4)).astype("float32").astype("float64")
WH = RNG.uniform(-0.7, 0.7, (4, 4)).astype("float32").astype("float64")
WS = RNG.uniform(-0.7, 0.7, (2, 4)).astype("float32").astype("float64")
B = RNG.uniform(-0.2, 0.2, (4,)).astype("float32").astype("float64")


def _offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(int)


def _const(value):
    return L.cast(L.assign(np.asarray(value, "float32")), "float64")


def _model(v, init_mode, with_static):
    """h_t = tanh(x_t WX + h_{t-1} WH [+ last row of the static sequence WS] + B)."""
    rnn = L.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(v["x"])
        if init_mode == "value":
            prev = rnn.memory(shape=[4], value=0.3, dtype="float64")
        else:
            prev = rnn.memory(init=v["h0"], need_reorder=True)
        acc = L.matmul(word, _const(WX)) + L.matmul(prev, _const(WH)) + _const(B)
        if with_static:
            last = L.sequence_pool(rnn.static_input(v["s"]), "last")
            acc = acc + L.matmul(last, _const(WS))
        hidden = L.tanh(acc)
        rnn.update_memory(prev, hidden)
        rnn.output(hidden)
    return rnn()


def _reference(x, lens, h0, s=None, s_lens=None):
    offsets, out = _offsets(lens), np.zeros((sum(lens), 4))
    s_off = _offsets(s_lens) if s is not None else None
    for i, n in enumerate(lens):
        h = h0[i]
        for t in range(n):
            acc = x[offsets[i] + t] @ WX + h @ WH + B
            if s is not None:
                acc = acc + s[s_off[i + 1] - 1] @ WS
            h = np.tanh(acc)
            out[offsets[i] + t] = h
    return out


CASES = [  # (x lengths, memory init, static input lengths or None)
    ([2, 4, 1, 3], "value", None),
    ([3, 1, 3], "init", None),
    ([2, 0, 3], "init", None),
    ([2, 4, 1], "value", [1, 3, 2]),
]


def _program(lens, init_mode, s_lens, wrt=()):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = {"x": fluid.data("x", [None, 3], "float64", lod_level=1),
             "h0": fluid.data("h0", [None, 4], "float64"),
             "s": fluid.data("s", [None, 2], "float64", lod_level=1)}
        for name, var in v.items():
            var.stop_gradient = name not in wrt
        out = _model(v, init_mode, s_lens is not None)
        loss = L.reduce_sum(out * _const(RNG.uniform(0.5, 1.5, (sum(lens), 4))))
        grads = fluid.gradients(loss, [v[n] for n in wrt]) if wrt else []
    return main, out, loss, grads


def _feeds(lens, s_lens, x, h0, s):
    feed = {"x": fluid.create_lod_tensor(x, [lens], PLACE), "h0": h0}
    feed["s"] = fluid.create_lod_tensor(s, [s_lens or [1] * len(lens)], PLACE)
    return feed


def _inputs(lens, s_lens):
    n = len(lens)
    return (RNG.uniform(-1, 1, (sum(lens), 3)), RNG.uniform(-1, 1, (n, 4)),
            RNG.uniform(-1, 1, (sum(s_lens or [1] * n), 2)))


@pytest.mark.parametrize("lens,init_mode,s_lens", CASES, ids=str)
def test_forward_matches_a_per_sequence_recurrence(lens, init_mode, s_lens):
    x, h0, s = _inputs(lens, s_lens)
    main, out, _, _ = _program(lens, init_mode, s_lens)
    got, = fluid.Executor(PLACE).run(main, feed=_feeds(lens, s_lens, x, h0, s),
                                     fetch_list=[out], scope=fluid.Scope(), return_numpy=False)
    start = np.full_like(h0, 0.3) if init_mode == "value" else h0
    want = _reference(x, lens, start, s if s_lens else None, s_lens)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-12, atol=1e-12)
    assert got.recursive_sequence_lengths() == [lens]


@pytest.mark.parametrize("lens,init_mode,s_lens", CASES, ids=str)
def test_gradients_match_finite_differences(lens, init_mode, s_lens, eps=1e-6):
    x, h0, s = _inputs(lens, s_lens)
    wrt = ["x"] + (["h0"] if init_mode == "init" else []) + (["s"] if s_lens else [])
    main, _, loss, grads = _program(lens, init_mode, s_lens, wrt)
    exe = fluid.Executor(PLACE)
    values = {"x": x, "h0": h0, "s": s}

    def run(vals, fetch):
        return exe.run(main, feed=_feeds(lens, s_lens, vals["x"], vals["h0"], vals["s"]),
                       fetch_list=fetch, scope=fluid.Scope())

    analytic = run(values, grads)
    for name, got in zip(wrt, analytic):
        numeric = np.zeros_like(values[name])
        for idx in np.ndindex(numeric.shape):
            plus, minus = dict(values), dict(values)
            plus[name], minus[name] = values[name].copy(), values[name].copy()
            plus[name][idx] += eps
            minus[name][idx] -= eps
            numeric[idx] = (float(run(plus, [loss])[0].sum())
                            - float(run(minus, [loss])[0].sum())) / (2 * eps)
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7,
                                   err_msg=f"d loss / d {name}")


def test_nested_dynamic_rnns_step_paragraphs_then_words():
    """An outer DynamicRNN over the sentences of two-level paragraphs, an inner one over each
    sentence's words: the inner last states are each sentence's recurrence, in the input's
    order, with the paragraphs' LoD."""
    lod = [[2, 1, 3], [3, 2, 4, 1, 2, 3]]
    x = RNG.uniform(-1, 1, (15, 3))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.data("x", [None, 3], "float64", lod_level=2)
        outer = L.DynamicRNN()
        with outer.block():
            sentence = outer.step_input(words)
            assert sentence.lod_level == 1
            inner = L.DynamicRNN()
            with inner.block():
                word = inner.step_input(sentence)
                prev = inner.memory(shape=[4], value=0.3, dtype="float64")
                hidden = L.tanh(L.matmul(word, _const(WX)) + L.matmul(prev, _const(WH))
                                + _const(B))
                inner.update_memory(prev, hidden)
                inner.output(hidden)
            outer.output(L.sequence_last_step(inner()))
        out = outer()
    got, = fluid.Executor(PLACE).run(main, feed={"x": fluid.create_lod_tensor(x, lod, PLACE)},
                                     fetch_list=[out], scope=fluid.Scope(), return_numpy=False)
    per_word = _reference(x, lod[1], np.full((len(lod[1]), 4), 0.3))
    np.testing.assert_allclose(np.array(got), per_word[_offsets(lod[1])[1:] - 1], rtol=1e-12)
    assert got.recursive_sequence_lengths() == [lod[0]]


def test_the_loop_keeps_iterations_only_for_a_backward_pass():
    """Forward only, the while op binds nothing to keep iterations in (each step's values
    are freed as it ends); a backward pass makes it keep the loop state per iteration."""
    main, _, _, _ = _program([2, 3], "value", None)
    loop, = [op for op in main.global_block().ops if op.type == "while"]
    assert not loop.output("StepScopes")
    main, _, _, _ = _program([2, 3], "value", None, wrt=["x"])
    loop, = [op for op in main.global_block().ops if op.type == "while"]
    assert loop.output("StepScopes")


def test_trains_with_sgd():
    main, startup = fluid.Program(), fluid.Program()
    # seeded: with seed 0 the initial weights come from the process's generator, so they
    # depended on every test run before this one (a full suite once drew a slow start)
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32", lod_level=1)
        rnn = L.DynamicRNN()
        with rnn.block():
            word = rnn.step_input(x)
            prev = rnn.memory(shape=[4])
            hidden = L.fc([word, prev], size=4, act="tanh")
            rnn.update_memory(prev, hidden)
            rnn.output(hidden)
        loss = L.mean(L.square(L.sequence_pool(rnn(), "average") - 0.5))
        fluid.optimizer.SGD(0.5).minimize(loss)
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": fluid.create_lod_tensor(RNG.uniform(-1, 1, (7, 3)).astype("float32"),
                                         [[3, 1, 3]], PLACE)}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0])
              for _ in range(8)]
    assert losses[-1] < losses[0] * 0.5


# -- errors ------------------------------------------------------------------------------------

def _in_block(fn):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3], "float32", lod_level=1)
        rnn = L.DynamicRNN()
        with rnn.block():
            fn(rnn, x)


def test_step_input_needs_a_lod_tensor():
    with pytest.raises(InvalidArgumentError, match="lod_level 0.*StaticRNN"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            dense = fluid.data("d", [None, 3], "float32")
            rnn = L.DynamicRNN()
            with rnn.block():
                rnn.step_input(dense)


def test_order_of_calls_is_checked():
    with pytest.raises(InvalidArgumentError, match="after step_input"):
        _in_block(lambda rnn, x: rnn.static_input(x))
    with pytest.raises(InvalidArgumentError, match="step_input should be invoked before"):
        _in_block(lambda rnn, x: rnn.memory(shape=[4]))
    with pytest.raises(InvalidArgumentError, match="invoke memory before update_memory"):
        _in_block(lambda rnn, x: rnn.update_memory(rnn.step_input(x), x))
    with pytest.raises(InvalidArgumentError, match="no step input"):
        _in_block(lambda rnn, x: None)
    rnn = L.DynamicRNN()
    with pytest.raises(InvalidArgumentError, match="inside rnn.block"):
        rnn.step_input(fluid.data("y", [None, 3], "float32", lod_level=1))
    with pytest.raises(InvalidArgumentError, match="outside the rnn block"):
        rnn()
