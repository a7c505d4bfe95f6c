"""Reference outputs of fluid 1.8's RNN API for tests/unit/test_rnn_api_oracle.py: rnn over
GRUCell / LSTMCell (sequence_length, is_reverse, time_major; outputs, final states and the
gradients of a fixed loss), a small seq2seq model in the shape of the PaddlePaddle book's
machine translation chapter (a bidirectional encoder made of two rnn calls, an attention
decoder cell over GRUCell) trained a few SGD steps, its beam-search inference with
BeamSearchDecoder + dynamic_decode, and the beam_search / beam_search_decode ops (one step
on LoD tensors, and the book's older While loop).

Run it with PaddlePaddle 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_rnn_api.py  # data/rnn_api.json

Every parameter is set after the startup program runs to `param_value(name, shape)` (a
deterministic function of its name), so spmd and fluid start from the same values. The
`run_*` functions take the `fluid` module and are shared with the test, which runs them with
spmd.fluid.
"""
import os
import sys
import zlib

import numpy as np

# name -> (cell, time_major, is_reverse, with sequence_length)
RNN_CASES = {
    "gru": ("gru", False, False, False),
    "gru_len_reverse": ("gru", False, True, True),
    "gru_time_major_len": ("gru", True, False, True),
    "lstm_len": ("lstm", False, False, True),
    "lstm_reverse_time_major": ("lstm", True, True, True),
}
BATCH, STEPS, WIDTH, HIDDEN = 3, 4, 3, 4
LENGTHS = np.array([4, 2, 3], dtype="int64")

# the seq2seq model
SRC_VOCAB, TRG_VOCAB, EMB, HID = 11, 9, 5, 6
BOS, EOS = 0, 1
LR, TRAIN_STEPS = 0.5, 4
BEAM, MAX_LEN = 3, 6
EOS_BIAS = 0.3


def param_value(name, shape):
    r = np.random.RandomState(zlib.crc32(name.encode()) % (2 ** 31))
    return r.uniform(-0.6, 0.6, shape).astype("float32")


def _rng(name):
    return np.random.RandomState(sum(ord(ch) for ch in name) + 11)


def _params(prog):
    return sorted(prog.global_block().all_parameters(), key=lambda p: p.name)


def _start(fluid, prog, startup):
    """A fresh scope with the startup program run and every parameter set."""
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        for p in _params(prog):
            scope.var(p.name).get_tensor().set(
                param_value(p.name, [int(d) for d in p.shape]), fluid.CPUPlace())
    return scope, exe


def _meta(prog):
    return [[p.name, [int(d) for d in p.shape]] for p in _params(prog)]


# -- rnn over the cells ---------------------------------------------------------------------

def rnn_feeds(name):
    kind, time_major, _, _ = RNN_CASES[name]
    r = _rng("rnn" + name)
    x_shape = (STEPS, BATCH, WIDTH) if time_major else (BATCH, STEPS, WIDTH)
    feeds = {"x": r.uniform(-1, 1, x_shape).astype("float32"), "len": LENGTHS,
             "h": r.uniform(-1, 1, (BATCH, HIDDEN)).astype("float32")}
    if kind == "lstm":  # zero initial states: see run_rnn
        feeds.pop("h")
    out_shape = (STEPS, BATCH, HIDDEN) if time_major else (BATCH, STEPS, HIDDEN)
    feeds["w"] = r.uniform(-1, 1, out_shape).astype("float32")
    return feeds


def run_rnn(fluid, name):
    kind, time_major, is_reverse, with_len = RNN_CASES[name]
    layers = fluid.layers
    feeds = rnn_feeds(name)
    if not with_len:
        feeds.pop("len")
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {}
        for k, a in sorted(feeds.items()):
            vs[k] = fluid.data(k, [-1] + list(a.shape[1:]), str(a.dtype))
            vs[k].stop_gradient = k in ("len", "w")
        if kind == "gru":
            cell, init = layers.GRUCell(HIDDEN), vs["h"]
        else:
            # fluid 1.8.5's rnn loops forever on a list or tuple of initial states (its type
            # check iterates over a Variable), so LSTM cases start from zero states
            cell, init = layers.LSTMCell(HIDDEN, forget_bias=0.5), None
        out, final = layers.rnn(cell, vs["x"], init, vs.get("len"), time_major=time_major,
                                is_reverse=is_reverse)
        finals = [final] if kind == "gru" else list(final)
        loss = layers.reduce_sum(out * vs["w"])
        for k, s in enumerate(finals):
            loss = loss + layers.reduce_sum(s) * (0.5 + k)
        wrt = [vs[k] for k in ("h", "x") if k in vs] + _params(prog)
        grads = fluid.gradients([loss], wrt)
    scope, exe = _start(fluid, prog, startup)
    with fluid.scope_guard(scope):
        got = exe.run(prog, feed=feeds, fetch_list=[out] + finals + grads)
    n = 1 + len(finals)
    return {"outs": [np.asarray(a) for a in got[:n]],
            "grads": [np.asarray(a) for a in got[n:]], "params": _meta(prog)}


def run_bidirectional(fluid, use_birnn):
    """A forward and a reversed GRU rnn, outputs concatenated: paddle 2.0's birnn in spmd,
    two rnn calls in fluid 1.8.5 (which has no birnn)."""
    layers = fluid.layers
    feeds = rnn_feeds("gru_len_reverse")
    feeds.pop("w")
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        x = fluid.data("x", [-1, STEPS, WIDTH], "float32")
        length = fluid.data("len", [-1], "int64")
        h = fluid.data("h", [-1, HIDDEN], "float32")
        fw, bw = layers.GRUCell(HIDDEN), layers.GRUCell(HIDDEN)
        if use_birnn:
            out, (sf, sb) = layers.birnn(fw, bw, x, (h, h), length)
        else:
            of, sf = layers.rnn(fw, x, h, length)
            ob, sb = layers.rnn(bw, x, h, length, is_reverse=True)
            out = layers.concat([of, ob], axis=-1)
    scope, exe = _start(fluid, prog, startup)
    with fluid.scope_guard(scope):
        got = exe.run(prog, feed=feeds, fetch_list=[out, sf, sb])
    return {"outs": [np.asarray(a) for a in got], "params": _meta(prog)}


# -- the seq2seq model --------------------------------------------------------------------------

def seq2seq_batch():
    """Source and target id batches (padded), their lengths and padding masks."""
    r = _rng("seq2seq")
    src_len = np.array([5, 3, 4], dtype="int64")
    trg_len = np.array([4, 4, 2], dtype="int64")
    src = r.randint(2, SRC_VOCAB, (3, 5)).astype("int64")
    trg = r.randint(2, TRG_VOCAB, (3, 4)).astype("int64")
    trg[:, 0] = BOS
    label = np.concatenate([trg[:, 1:], np.full((3, 1), EOS)], axis=1).astype("int64")
    src_mask = (np.arange(5)[None, :] < src_len[:, None]).astype("float32")
    trg_mask = (np.arange(4)[None, :] < trg_len[:, None]).astype("float32")
    for b in range(3):
        src[b, src_len[b]:] = EOS
        label[b, trg_len[b] - 1] = EOS
    return {"src": src, "src_len": src_len, "src_mask": src_mask, "trg": trg,
            "label": label[:, :, None], "trg_mask": trg_mask}


def _make_decoder_cell(fluid):
    layers = fluid.layers

    class DecoderCell(layers.RNNCell):
        """The book's decoder: attention over the encoder's outputs, then a GRU step."""

        def __init__(self, hidden_size):
            self.hidden_size = hidden_size
            self.gru_cell = layers.GRUCell(hidden_size)

        def attention(self, hidden, enc_out, enc_proj, padding_bias):
            query = layers.unsqueeze(
                layers.fc(hidden, size=self.hidden_size, bias_attr=False), [1])
            mixed = layers.elementwise_add(
                enc_proj, layers.expand(query, [1, layers.shape(enc_proj)[1], 1]))
            scores = layers.squeeze(layers.fc(layers.tanh(mixed), size=1, num_flatten_dims=2,
                                              bias_attr=False), [2])
            weights = layers.softmax(layers.elementwise_add(scores, padding_bias))
            return layers.reduce_sum(layers.elementwise_mul(enc_out, weights, axis=0), dim=1)

        def call(self, step_input, hidden, enc_out, enc_proj, padding_bias):
            context = self.attention(hidden, enc_out, enc_proj, padding_bias)
            return self.gru_cell(layers.concat([step_input, context], axis=1), hidden)

    return DecoderCell(HID)


def _encoder(fluid, cell_kind, src, src_len):
    layers = fluid.layers
    emb = fluid.embedding(src, [SRC_VOCAB, EMB], param_attr=fluid.ParamAttr(name="src_emb"))
    make = (lambda: layers.GRUCell(HID)) if cell_kind == "gru" else \
        (lambda: layers.LSTMCell(HID))
    fw_out, fw_state = layers.rnn(make(), emb, sequence_length=src_len)
    bw_out, bw_state = layers.rnn(make(), emb, sequence_length=src_len, is_reverse=True)
    if cell_kind == "lstm":
        fw_state, bw_state = fw_state[0], bw_state[0]
    return (layers.concat([fw_out, bw_out], axis=2),
            layers.concat([fw_state, bw_state], axis=1))


def _trg_embedder(fluid):
    return lambda ids: fluid.embedding(ids, [TRG_VOCAB, EMB],
                                       param_attr=fluid.ParamAttr(name="trg_emb"))


def _output_layer(fluid):
    return lambda x: fluid.layers.fc(x, TRG_VOCAB, num_flatten_dims=len(x.shape) - 1,
                                     param_attr=fluid.ParamAttr(name="out_w"),
                                     bias_attr=fluid.ParamAttr(name="out_b"))


def seq2seq(fluid, cell_kind, mode, is_test=False):
    """The model's variables: mode "train" -> (feed names, loss); "beam" -> (feed names,
    [predicted ids, final log_probs, final lengths, decoded lengths])."""
    layers = fluid.layers
    src = fluid.data("src", [None, None], "int64")
    src_len = fluid.data("src_len", [None], "int64")
    src_mask = fluid.data("src_mask", [None, None], "float32")
    enc_out, enc_state = _encoder(fluid, cell_kind, src, src_len)
    enc_proj = layers.fc(enc_out, HID, num_flatten_dims=2, bias_attr=False)
    padding_bias = layers.scale(src_mask, scale=1e9, bias=-1e9)
    dec_init = layers.fc(enc_state, HID, act="tanh")
    cell = _make_decoder_cell(fluid)
    if mode == "train":
        trg = fluid.data("trg", [None, None], "int64")
        label = fluid.data("label", [None, None, 1], "int64")
        trg_mask = fluid.data("trg_mask", [None, None], "float32")
        dec_out, _ = layers.rnn(cell, _trg_embedder(fluid)(trg), initial_states=dec_init,
                                enc_out=enc_out, enc_proj=enc_proj, padding_bias=padding_bias)
        logits = _output_layer(fluid)(dec_out)
        loss = layers.softmax_with_cross_entropy(logits, label)
        loss = layers.elementwise_mul(layers.squeeze(loss, [2]), trg_mask)
        loss = layers.reduce_mean(layers.reduce_sum(loss, dim=[1]))
        return ["src", "src_len", "src_mask", "trg", "label", "trg_mask"], loss
    tile = layers.BeamSearchDecoder.tile_beam_merge_with_batch
    decoder = layers.BeamSearchDecoder(cell, BOS, EOS, BEAM,
                                       embedding_fn=_trg_embedder(fluid),
                                       output_fn=_output_layer(fluid))
    ids, states, lengths = layers.dynamic_decode(
        decoder, inits=dec_init, max_step_num=MAX_LEN, is_test=is_test, return_length=True,
        enc_out=tile(enc_out, BEAM), enc_proj=tile(enc_proj, BEAM),
        padding_bias=tile(padding_bias, BEAM))
    return ["src", "src_len", "src_mask"], [ids, states.log_probs, states.lengths, lengths]


def run_train(fluid, cell_kind):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        names, loss = seq2seq(fluid, cell_kind, "train")
        fluid.optimizer.SGD(LR).minimize(loss)
    batch = seq2seq_batch()
    feed = {k: batch[k] for k in names}
    scope, exe = _start(fluid, prog, startup)
    with fluid.scope_guard(scope):
        losses = [float(np.asarray(exe.run(prog, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
                  for _ in range(TRAIN_STEPS)]
        final = exe.run(prog, feed=feed, fetch_list=[p.name for p in _params(prog)])
    return {"losses": losses, "params": _meta(prog), "final": [np.asarray(a) for a in final]}


def run_beam(fluid, cell_kind, is_test):
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        names, outs = seq2seq(fluid, cell_kind, "beam", is_test=is_test)
    batch = seq2seq_batch()
    scope, exe = _start(fluid, prog, startup)
    # make the end token likely enough that beams end at different steps
    bias = np.array(scope.find_var("out_b").get_tensor())
    bias[EOS] += EOS_BIAS
    scope.var("out_b").get_tensor().set(bias, fluid.CPUPlace())
    with fluid.scope_guard(scope):
        got = exe.run(prog, feed={k: batch[k] for k in names}, fetch_list=outs)
    return {"outs": [np.asarray(a) for a in got], "params": _meta(prog)}


# -- BasicDecoder with its helpers --------------------------------------------------------------

def _basic_decoder(fluid, helper):
    return fluid.layers.BasicDecoder(fluid.layers.GRUCell(HID), helper,
                                     output_fn=_output_layer(fluid))


def run_greedy(fluid):
    """Greedy decoding (GreedyEmbeddingHelper): ids, logits, final state, lengths."""
    layers = fluid.layers
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        start = fluid.data("start", [None], "int64")
        h0 = fluid.data("h0", [None, HID], "float32")
        helper = layers.GreedyEmbeddingHelper(_trg_embedder(fluid), start, EOS)
        outs, state, lengths = layers.dynamic_decode(_basic_decoder(fluid, helper), inits=h0,
                                                     max_step_num=MAX_LEN, return_length=True)
    r = _rng("greedy")
    feed = {"start": np.full([4], BOS, "int64"),
            "h0": r.uniform(-1, 1, (4, HID)).astype("float32")}
    scope, exe = _start(fluid, prog, startup)
    bias = np.array(scope.find_var("out_b").get_tensor())
    bias[EOS] += 1.0  # some sequences end before max_step_num
    scope.var("out_b").get_tensor().set(bias, fluid.CPUPlace())
    with fluid.scope_guard(scope):
        got = exe.run(prog, feed=feed,
                      fetch_list=[outs.sample_ids, outs.cell_outputs, state, lengths])
    return {"outs": [np.asarray(a) for a in got], "params": _meta(prog)}


def run_teacher_forcing(fluid):
    """TrainingHelper + BasicDecoder + dynamic_decode trained a few SGD steps (gradients
    through the decoding loop): losses and final parameters."""
    layers = fluid.layers
    batch = seq2seq_batch()
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        trg = fluid.data("trg", [None, None], "int64")
        label = fluid.data("label", [None, None, 1], "int64")
        trg_mask = fluid.data("trg_mask", [None, None], "float32")
        trg_len = fluid.data("trg_len", [None], "int64")
        h0 = fluid.data("h0", [None, HID], "float32")
        h0.stop_gradient = False
        helper = layers.TrainingHelper(_trg_embedder(fluid)(trg), trg_len)
        outs, _ = layers.dynamic_decode(_basic_decoder(fluid, helper), inits=h0)
        loss = layers.softmax_with_cross_entropy(outs.cell_outputs, label)
        loss = layers.elementwise_mul(layers.squeeze(loss, [2]), trg_mask)
        loss = layers.reduce_mean(layers.reduce_sum(loss, dim=[1]))
        fluid.optimizer.SGD(LR).minimize(loss)
    feed = {k: batch[k] for k in ("trg", "label", "trg_mask")}
    feed["trg_len"] = batch["trg_mask"].sum(axis=1).astype("int64")
    feed["h0"] = _rng("teacher").uniform(-1, 1, (3, HID)).astype("float32")
    scope, exe = _start(fluid, prog, startup)
    with fluid.scope_guard(scope):
        losses = [float(np.asarray(exe.run(prog, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
                  for _ in range(TRAIN_STEPS)]
        final = exe.run(prog, feed=feed, fetch_list=[p.name for p in _params(prog)])
    return {"losses": losses, "params": _meta(prog), "final": [np.asarray(a) for a in final]}


# -- the beam_search and beam_search_decode ops -------------------------------------------------

# one step on LoD tensors: name -> (pre_ids, pre_scores, ids or None, scores, LoD of the
# inputs (two levels, as lengths), beam_size, end_id, is_accumulated)
def beam_search_cases():
    r = _rng("beam_search")
    probs = r.uniform(0.05, 1, (4, 5)).astype("float32")
    cases = {
        "accumulated": (np.array([[1], [2], [3], [4]], "int64"),
                        np.array([[0.1], [0.2], [0.3], [0.4]], "float32"),
                        np.array([[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]], "int64"),
                        np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1],
                                  [0.7, 0.5, 0.1]], "float32"),
                        [[2, 2], [1, 1, 1, 1]], 2, 0, True),
        # the first prefix has ended (pre_id == end_id): it carries its score on
        "ended_prefix": (np.array([[0], [2], [3], [4]], "int64"),
                         np.array([[0.9], [0.2], [0.3], [0.4]], "float32"),
                         np.array([[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]], "int64"),
                         np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1],
                                   [0.7, 0.5, 0.1]], "float32"),
                         [[2, 2], [1, 1, 1, 1]], 2, 0, True),
        # every prefix of the first source has ended and only end_id is chosen: pruned
        "pruned_source": (np.array([[0], [0], [3], [4]], "int64"),
                          np.array([[0.9], [0.8], [0.3], [0.4]], "float32"),
                          np.array([[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]], "int64"),
                          np.array([[0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.9, 0.5, 0.1],
                                    [0.7, 0.5, 0.1]], "float32"),
                          [[2, 2], [1, 1, 1, 1]], 2, 0, True),
        # equal scores: fluid's order (a higher prefix row first; at the last place of a
        # full beam, the later of two equal candidates)
        "ties": (np.array([[1], [2]], "int64"), np.array([[0.0], [0.0]], "float32"),
                 np.array([[3, 4, 5], [6, 7, 8]], "int64"),
                 np.array([[0.5, 0.5, 0.5], [0.5, 0.2, 0.5]], "float32"),
                 [[2], [1, 1]], 2, 0, True),
        # probabilities (not accumulated) and ids None: ids are the column indices
        "probabilities": (np.array([[1], [2], [3], [4]], "int64"),
                          np.log(np.array([[0.5], [0.2], [0.3], [0.4]], "float32")),
                          None, probs, [[1, 3], [1, 1, 1, 1]], 3, 0, False),
    }
    return cases


def run_beam_search_op(fluid, name):
    pre_ids, pre_scores, ids, scores, lod, beam, end_id, accumulated = \
        beam_search_cases()[name]
    place = fluid.CPUPlace()
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {k: fluid.data(k, [-1, a.shape[1]], str(a.dtype), lod_level=2)
              for k, a in (("pre_ids", pre_ids), ("pre_scores", pre_scores), ("ids", ids),
                           ("scores", scores)) if a is not None}
        outs = fluid.layers.beam_search(vs["pre_ids"], vs["pre_scores"], vs.get("ids"),
                                        vs["scores"], beam, end_id, is_accumulated=accumulated,
                                        return_parent_idx=True)
    feed = {k: fluid.create_lod_tensor(a, lod, place)
            for k, a in (("pre_ids", pre_ids), ("pre_scores", pre_scores), ("ids", ids),
                         ("scores", scores)) if a is not None}
    exe = fluid.Executor(place)
    got = exe.run(prog, feed=feed, fetch_list=list(outs), return_numpy=False)
    return {"outs": [np.array(t) for t in got],
            "lod": [t.lod() for t in got[:2]]}


def run_beam_search_loop(fluid, steps=3):
    """The book's older inference loop: a While over tensor arrays, beam_search on LoD
    tensors each step, then beam_search_decode over the arrays. Returns the sentences' ids
    and scores with their LoD."""
    layers = fluid.layers
    place = fluid.CPUPlace()
    batch, vocab, hidden, beam = 2, 7, 4, 2
    r = _rng("beam_loop")
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        init_ids = fluid.data("init_ids", [-1, 1], "int64", lod_level=2)
        init_scores = fluid.data("init_scores", [-1, 1], "float32", lod_level=2)
        state0 = fluid.data("state0", [-1, hidden], "float32")
        counter = layers.zeros([1], "int64", force_cpu=True)
        limit = layers.fill_constant([1], "int64", steps)
        ids_array = layers.array_write(init_ids, counter)
        scores_array = layers.array_write(init_scores, counter)
        state_array = layers.array_write(state0, counter)
        cond = layers.less_than(counter, limit)
        loop = layers.While(cond)
        with loop.block():
            pre_ids = layers.array_read(ids_array, counter)
            pre_scores = layers.array_read(scores_array, counter)
            pre_state = layers.array_read(state_array, counter)
            emb = fluid.embedding(pre_ids, [vocab, hidden],
                                  param_attr=fluid.ParamAttr(name="loop_emb"))
            state = layers.fc([emb, pre_state], hidden, act="tanh",
                              param_attr=[fluid.ParamAttr(name="loop_w1"),
                                          fluid.ParamAttr(name="loop_w2")],
                              bias_attr=fluid.ParamAttr(name="loop_b"))
            probs = layers.fc(state, vocab, act="softmax",
                              param_attr=fluid.ParamAttr(name="loop_out"), bias_attr=False)
            topk_scores, topk_ids = layers.topk(probs, k=beam)
            accu = layers.elementwise_add(layers.log(topk_scores),
                                          layers.reshape(pre_scores, [-1]), axis=0)
            accu = layers.lod_reset(accu, pre_ids)
            topk_ids = layers.lod_reset(topk_ids, pre_ids)
            sel_ids, sel_scores, parent = layers.beam_search(
                pre_ids, pre_scores, topk_ids, accu, beam, end_id=EOS, return_parent_idx=True)
            next_state = layers.gather(state, parent)
            layers.increment(counter, 1, in_place=True)
            layers.array_write(sel_ids, counter, array=ids_array)
            layers.array_write(sel_scores, counter, array=scores_array)
            layers.array_write(next_state, counter, array=state_array)
            layers.logical_and(layers.less_than(counter, limit),
                               layers.logical_not(layers.is_empty(sel_ids)), out=cond)
        sent_ids, sent_scores = layers.beam_search_decode(ids_array, scores_array, beam, EOS)
    lod = [[1] * batch, [1] * batch]
    feed = {"init_ids": fluid.create_lod_tensor(np.full((batch, 1), BOS, "int64"), lod, place),
            "init_scores": fluid.create_lod_tensor(np.zeros((batch, 1), "float32"), lod, place),
            "state0": r.uniform(-1, 1, (batch, hidden)).astype("float32")}
    scope, exe = _start(fluid, prog, startup)
    with fluid.scope_guard(scope):
        got = exe.run(prog, feed=feed, fetch_list=[sent_ids, sent_scores], return_numpy=False)
    return {"outs": [np.array(t) for t in got], "lod": [t.lod() for t in got]}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {}
    for name in RNN_CASES:
        with fluid.unique_name.guard():
            cases["rnn/" + name] = run_rnn(fluid, name)
    with fluid.unique_name.guard():
        cases["bidirectional"] = run_bidirectional(fluid, use_birnn=False)
    for kind in ("gru", "lstm"):
        with fluid.unique_name.guard():
            cases["train/" + kind] = run_train(fluid, kind)
        for is_test in (False, True):
            with fluid.unique_name.guard():
                cases[f"beam/{kind}/{is_test}"] = run_beam(fluid, kind, is_test)
    with fluid.unique_name.guard():
        cases["greedy"] = run_greedy(fluid)
    with fluid.unique_name.guard():
        cases["teacher_forcing"] = run_teacher_forcing(fluid)
    for name in beam_search_cases():
        with fluid.unique_name.guard():
            cases["beam_search_op/" + name] = run_beam_search_op(fluid, name)
    with fluid.unique_name.guard():
        cases["beam_search_loop"] = run_beam_search_loop(fluid)
    save("rnn_api", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
