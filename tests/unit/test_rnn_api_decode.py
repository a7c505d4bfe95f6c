"""dynamic_decode with a user Decoder against a numpy simulation: stopping when every sequence
is finished or after max_step_num, sequence lengths, impute_finished, output_time_major,
is_test (reused variables) against per-step arrays, and the gradient through the decoding loop
against central finite differences in float64; BeamSearchDecoder.tile_beam_merge_with_batch
and the decoder errors."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError

layers = fluid.layers
THRESHOLD = 2.0


class Accumulate(layers.Decoder):
    """state += w * x each step (state starts at 0); a sequence finishes once its state
    reaches THRESHOLD; outputs the new state and its square."""

    def __init__(self, w):
        self.w = w

    def initialize(self, inits):
        zeros = layers.elementwise_mul(inits, layers.zeros_like(inits))
        finished = layers.cast(layers.zeros_like(layers.reduce_sum(inits, dim=1)), "bool")
        return inits, zeros, finished

    def step(self, time, inputs, states, **kwargs):
        new = states + layers.elementwise_mul(inputs, self.w)
        done = layers.reduce_sum(layers.cast(new >= THRESHOLD, "int32"), dim=1) > 0
        return [new, new * new], new, inputs, done


def simulate(x, w, max_step_num=None, impute_finished=False):
    batch = x.shape[0]
    state, finished = np.zeros_like(x), np.zeros(batch, bool)
    lengths, outs, step = np.zeros(batch, "int64"), [], 0
    while True:
        new = state + x * w
        outs.append(new)
        done = (new >= THRESHOLD).any(axis=1) | finished
        lengths += ~finished
        if impute_finished:
            new = np.where(finished[:, None], state, new)
        state, finished = new, done
        step += 1
        if finished.all() or (max_step_num is not None and step > max_step_num):
            break
    return np.stack(outs), state, lengths


def _build(x_value, w_value, grad=False, **kwargs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, x_value.shape[1]], "float64")
        w = fluid.data("w", [x_value.shape[1]], "float64")
        x.stop_gradient = not grad
        outs, state, lengths = layers.dynamic_decode(Accumulate(w), inits=x,
                                                     return_length=True, **kwargs)
        fetch = [outs[0], outs[1], state, lengths]
        loss = None
        if grad:
            lw = fluid.data("lw", [-1, -1, x_value.shape[1]], "float64")
            loss = layers.reduce_sum(outs[0] * lw) + layers.reduce_sum(state * state)
            fetch += fluid.gradients([loss], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, fetch, loss


X = np.array([[0.3, 0.1], [1.2, 0.0], [0.5, 0.6]])
W = np.array([1.0, 2.0])


@pytest.mark.parametrize("is_test", [False, True], ids=["arrays", "is_test"])
@pytest.mark.parametrize("options", [{}, {"max_step_num": 2}, {"impute_finished": True},
                                     {"output_time_major": True}],
                         ids=["default", "max_step_num", "impute_finished", "time_major"])
def test_dynamic_decode_matches_simulation(options, is_test):
    main, exe, fetch, _ = _build(X, W, is_test=is_test, **options)
    out, sq, state, lengths = exe.run(main, feed={"x": X, "w": W}, fetch_list=fetch)
    want_out, want_state, want_len = simulate(
        X, W, options.get("max_step_num"), options.get("impute_finished", False))
    if not options.get("output_time_major"):
        want_out = want_out.transpose(1, 0, 2)
    np.testing.assert_allclose(out, want_out, rtol=1e-12)
    np.testing.assert_allclose(sq, want_out ** 2, rtol=1e-12)
    np.testing.assert_allclose(state, want_state, rtol=1e-12)
    np.testing.assert_array_equal(lengths, want_len)


def test_gradient_through_the_decoding_loop():
    steps = simulate(X, W, impute_finished=True)[0].shape[0]
    lw = np.random.default_rng(3).uniform(0.5, 1.5, (X.shape[0], steps, X.shape[1]))
    main, exe, fetch, loss = _build(X, W, grad=True, impute_finished=True)
    feed = {"x": X.copy(), "w": W, "lw": lw}
    analytic = exe.run(main, feed=feed, fetch_list=fetch)[-1]
    numeric, eps = np.zeros_like(X), 1e-6
    for idx in np.ndindex(X.shape):
        vals = []
        for sign in (1, -1):
            x = X.copy()
            x[idx] += sign * eps
            vals.append(float(exe.run(main, feed={**feed, "x": x}, fetch_list=[loss])[0]))
        numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_tile_beam_merge_with_batch_repeats_each_row():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2, 3], "float32")
        y = layers.BeamSearchDecoder.tile_beam_merge_with_batch(x, 3)
    value = np.arange(12, dtype="float32").reshape(2, 2, 3)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": value}, fetch_list=[y])
    np.testing.assert_array_equal(got, np.repeat(value, 3, axis=0))


def test_decoder_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        cell = layers.GRUCell(3)
        with pytest.raises(InvalidArgumentError, match="decoder must be a fluid.layers.Decoder"):
            layers.dynamic_decode(cell)
        with pytest.raises(InvalidArgumentError, match="does not define initialize"):
            layers.dynamic_decode(layers.Decoder())
        with pytest.raises(InvalidArgumentError, match="beam_size must be positive"):
            layers.BeamSearchDecoder(cell, 0, 1, 0)
        h = fluid.data("h", [-1, 3], "float32")
        decoder = layers.BeamSearchDecoder(
            cell, 0, 7, 2,
            embedding_fn=lambda ids: layers.cast(layers.unsqueeze(ids, [2]), "float32"),
            output_fn=lambda x: layers.fc(x, 5, num_flatten_dims=2))
        with pytest.raises(InvalidArgumentError, match="end_token 7 is outside the vocabulary"):
            layers.dynamic_decode(decoder, inits=h, max_step_num=3)


# -- BasicDecoder helpers -------------------------------------------------------------------------

class AddCell(layers.RNNCell):
    """outputs = states + inputs (the running sum of the inputs fed so far)."""

    def call(self, inputs, states):
        new = states + inputs
        return new, new


@pytest.mark.parametrize("time_major", [False, True])
def test_training_helper_feeds_the_target_steps(time_major):
    x = np.arange(24, dtype="float64").reshape(3, 4, 2)  # [batch, time, 2]
    lengths = np.array([4, 2, 3], dtype="int64")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", [-1, -1, 2], "float64")
        lv = fluid.data("len", [-1], "int64")
        h0 = layers.fill_constant_batch_size_like(lv, [-1, 2], "float64", 0.0)
        inputs = layers.transpose(xv, [1, 0, 2]) if time_major else xv
        helper = layers.TrainingHelper(inputs, lv, time_major=time_major)
        outs, state, got_len = layers.dynamic_decode(
            layers.BasicDecoder(AddCell(), helper), inits=h0, output_time_major=time_major,
            return_length=True)
    out, ids, got_len = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": x, "len": lengths},
        fetch_list=[outs.cell_outputs, outs.sample_ids, got_len])
    want = np.cumsum(x, axis=1)  # every step runs until the longest sequence ends
    if time_major:
        want = want.transpose(1, 0, 2)
    np.testing.assert_allclose(out, want)
    np.testing.assert_array_equal(ids, np.argmax(want, axis=-1))
    np.testing.assert_array_equal(got_len, lengths)


def _sampling_program(temperature, seed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        start = fluid.data("start", [-1], "int64")
        h0 = fluid.data("h0", [-1, 4], "float32")
        embed = lambda ids: fluid.embedding(ids, [6, 3],  # noqa: E731
                                            param_attr=fluid.ParamAttr(name="emb"))
        project = lambda x: layers.fc(x, 6, param_attr=fluid.ParamAttr(name="proj"))  # noqa: E731
        helper = (layers.GreedyEmbeddingHelper(embed, start, 5) if temperature is None else
                  layers.SampleEmbeddingHelper(embed, start, 5, temperature, seed))
        outs, _ = layers.dynamic_decode(layers.BasicDecoder(layers.GRUCell(4), helper, project),
                                        inits=h0, max_step_num=4)
    return main, startup, outs.sample_ids


def _sample(temperature, seed):
    main, startup, ids = _sampling_program(temperature, seed)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"start": np.zeros([8], "int64"),
            "h0": np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype("float32")}
    with fluid.scope_guard(scope):
        exe.run(startup)
        rng = np.random.default_rng(1)
        for p in sorted(main.global_block().all_parameters(), key=lambda p: p.name):
            scope.var(p.name).get_tensor().set(
                rng.uniform(-1, 1, p.shape).astype("float32"))
        return exe.run(main, feed=feed, fetch_list=[ids])[0]


def test_sample_embedding_helper_draws_from_the_softmax():
    greedy = _sample(None, None)
    # a tiny temperature makes the softmax one-hot: the greedy ids
    np.testing.assert_array_equal(_sample(1e-4, 7), greedy)
    hot = _sample(5.0, 7)
    assert hot.min() >= 0 and hot.max() < 6
    np.testing.assert_array_equal(hot, _sample(5.0, 7))  # the seed fixes the draws
    assert not np.array_equal(hot, greedy)


def test_basic_decoder_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(InvalidArgumentError, match="helper must be a fluid.layers.Decode"):
            layers.BasicDecoder(layers.GRUCell(3), object())
        with pytest.raises(InvalidArgumentError, match="does not define initialize"):
            layers.dynamic_decode(layers.BasicDecoder(layers.GRUCell(3), layers.DecodeHelper()))
