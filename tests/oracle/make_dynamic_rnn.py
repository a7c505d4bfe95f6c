"""Reference outputs of DynamicRNN and the LoD tensor-array ops (lod_rank_table,
max_sequence_len, lod_tensor_to_array, array_to_lod_tensor, shrink_memory,
reorder_lod_tensor_by_rank), for tests/unit/test_dynamic_rnn_oracle.py.

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_dynamic_rnn.py
        # -> data/dynamic_rnn.json

Each case builds one program with `fluid` (the real one here, spmd.fluid in the test), runs
it on LoD feeds and returns its fetches (values, and the LoD of those that carry one) and
the gradients fluid.gradients gives. TRAIN_CASES train a sentiment-style classifier (embedding
-> DynamicRNN with an fc step and a memory -> last step -> fc softmax) and a decoder with a
static input (the book's machine translation) for a few SGD steps from fixed parameters, and
return the losses and the parameters after.
"""
import os
import sys

import numpy as np

_R = np.random.RandomState(18)
X_LENS = [[2, 4, 1, 4]]  # ties (4, 4) keep their order in the rank table
X = _R.uniform(-1, 1, (11, 3)).astype("float32")
Y_LENS = [[1, 3, 2, 2]]  # one sequence per sequence of X, other lengths
Y = _R.uniform(-1, 1, (8, 2)).astype("float32")
M = _R.uniform(-1, 1, (4, 2)).astype("float32")  # one row per sequence
N_LENS = [[2, 1], [1, 3, 2]]  # two levels
N = _R.uniform(-1, 1, (6, 2)).astype("float32")
W_STEP = _R.uniform(-0.6, 0.6, (3, 5)).astype("float32")
W_MEM = _R.uniform(-0.6, 0.6, (5, 5)).astype("float32")
W_STATIC = _R.uniform(-0.6, 0.6, (2, 5)).astype("float32")
B5 = _R.uniform(-0.2, 0.2, (5,)).astype("float32")
INIT = _R.uniform(-1, 1, (4, 5)).astype("float32")

VOCAB, EMB, HID, CLASSES = 12, 4, 6, 3
EMB_T = _R.uniform(-0.5, 0.5, (VOCAB, EMB)).astype("float32")
W_IN = _R.uniform(-0.5, 0.5, (EMB, HID)).astype("float32")
W_H = _R.uniform(-0.5, 0.5, (HID, HID)).astype("float32")
B_H = _R.uniform(-0.1, 0.1, (HID,)).astype("float32")
W_OUT = _R.uniform(-0.5, 0.5, (HID, CLASSES)).astype("float32")
B_OUT = _R.uniform(-0.1, 0.1, (CLASSES,)).astype("float32")
W_ENC = _R.uniform(-0.5, 0.5, (EMB, HID)).astype("float32")
W_CTX = _R.uniform(-0.5, 0.5, (HID, HID)).astype("float32")
W_DEC = _R.uniform(-0.5, 0.5, (HID, VOCAB)).astype("float32")
WORDS_LENS = [[3, 5, 2, 4, 1]]
WORDS = _R.randint(0, VOCAB, (15, 1)).astype("int64")
LABELS = _R.randint(0, CLASSES, (5, 1)).astype("int64")
TRG_LENS = [[2, 4, 3, 1, 3]]
TRG = _R.randint(0, VOCAB, (13, 1)).astype("int64")
TRG_NEXT = _R.randint(0, VOCAB, (13, 1)).astype("int64")
PARAGRAPHS_LENS = [[2, 1, 3], [3, 2, 4, 1, 2, 3]]  # paragraphs of sentences of words
PARAGRAPHS = _R.randint(0, VOCAB, (15, 1)).astype("int64")
PARAGRAPH_LABELS = _R.randint(0, 2, (6, 1)).astype("float32")  # one per sentence
W_NEST = _R.uniform(-0.5, 0.5, (HID, 1)).astype("float32")


def _attr(fluid, name, value):
    return fluid.ParamAttr(name=name,
                           initializer=fluid.initializer.NumpyArrayInitializer(value))


def _lod_data(fluid, name, value, lod_level=1, grad=True):
    v = fluid.data(name, [None] + list(value.shape[1:]), str(value.dtype), lod_level=lod_level)
    v.stop_gradient = not grad
    return v


def _feed(fluid, pairs):
    place = fluid.CPUPlace()
    return {name: (fluid.create_lod_tensor(value, lens, place) if lens else value)
            for name, (value, lens) in pairs.items()}


def array_ops(fluid):
    """The rank table's order, arrays of time steps, the way back, reorder and shrink (with
    and without LoD), and their gradients."""
    L, cf = fluid.layers, fluid.layers.control_flow
    x = _lod_data(fluid, "x", X)
    y = _lod_data(fluid, "y", Y)
    m = fluid.data("m", [None, 2], "float32")
    m.stop_gradient = False
    table = cf.lod_rank_table(x)
    n = cf.max_sequence_len(table)
    arr = cf.lod_tensor_to_array(x, table)
    steps = [L.array_read(arr, L.fill_constant([1], "int64", t)) for t in range(4)]
    back = cf.array_to_lod_tensor(arr, table)
    ry, rm = L.reorder_lod_tensor_by_rank(y, table), L.reorder_lod_tensor_by_rank(m, table)
    shrunk = [cf.shrink_memory(v, L.fill_constant([1], "int64", t), table)
              for v in (ry, rm) for t in (0, 1, 2, 3)]
    loss = (L.reduce_sum(back * back) + L.reduce_sum(steps[1]) * 2.0
            + L.reduce_sum(L.sequence_pool(ry, "sum") * rm)
            + L.reduce_sum(shrunk[2] * shrunk[2]) + L.reduce_sum(shrunk[5] * 3.0))
    grads = fluid.gradients(loss, [x, y, m])
    feed = _feed(fluid, {"x": (X, X_LENS), "y": (Y, Y_LENS), "m": (M, None)})
    return feed, [n] + steps + [back, ry, rm] + shrunk + [loss] + grads


def nested_lod(fluid):
    """Two levels of LoD: tables at level 0 and 1, arrays whose elements keep the level
    below, the way back, reordering whole paragraphs."""
    cf = fluid.layers.control_flow
    x = _lod_data(fluid, "x", N, lod_level=2)
    outs = []
    for level in (0, 1):
        table = cf.lod_rank_table(x, level=level)
        arr = cf.lod_tensor_to_array(x, table)
        outs += [cf.max_sequence_len(table), cf.array_to_lod_tensor(arr, table)]
    outs.append(fluid.layers.reorder_lod_tensor_by_rank(x, cf.lod_rank_table(x)))
    return _feed(fluid, {"x": (N, N_LENS)}), outs


def _step(fluid, word, prev, extra=None, act="tanh"):
    L = fluid.layers
    ins = [word, prev] + ([extra] if extra is not None else [])
    attrs = [_attr(fluid, "w_step", W_STEP), _attr(fluid, "w_mem", W_MEM)]
    if extra is not None:
        attrs.append(_attr(fluid, "w_static", W_STATIC))
    return L.fc(ins, size=5, act=act, param_attr=attrs, bias_attr=_attr(fluid, "b5", B5))


def dyn_rnn(fluid):
    """A DynamicRNN with a memory from shape/value and one from init (reordered), two
    outputs; values, LoD and gradients for the input and the parameters."""
    L = fluid.layers
    x = _lod_data(fluid, "x", X)
    init = fluid.data("init", [None, 5], "float32")
    init.stop_gradient = False
    rnn = L.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(x)
        prev = rnn.memory(shape=[5], value=0.5)
        other = rnn.memory(init=init, need_reorder=True)
        hidden = _step(fluid, word, prev)
        mixed = hidden * other
        rnn.update_memory(prev, hidden)
        rnn.update_memory(other, L.sigmoid(mixed))
        rnn.output(hidden, mixed)
    out, out2 = rnn()
    last = L.sequence_last_step(out2)
    loss = L.reduce_mean(out * out) + L.reduce_sum(last)
    grads = fluid.gradients(loss, [x, init] + [fluid.default_main_program().global_block()
                                               .var(n) for n in ("w_step", "w_mem", "b5")])
    feed = _feed(fluid, {"x": (X, X_LENS), "init": (INIT, None)})
    return feed, [out, out2, last, loss] + grads


def dyn_rnn_static(fluid):
    """static_input as test_dynrnn_static_input: the static sequences in the step input's
    order, shrunk each step, pooled inside the step; gradients for both inputs."""
    L = fluid.layers
    x = _lod_data(fluid, "x", X)
    y = _lod_data(fluid, "y", Y)
    rnn = L.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(x)
        static = rnn.static_input(y)
        last = L.sequence_pool(static, "last")
        prev = rnn.memory(shape=[5])
        hidden = _step(fluid, word, prev, last)
        rnn.update_memory(prev, hidden)
        rnn.output(hidden)
    out = rnn()
    loss = L.reduce_mean(L.sequence_pool(out, "last"))
    grads = fluid.gradients(loss, [x, y])
    return _feed(fluid, {"x": (X, X_LENS), "y": (Y, Y_LENS)}), [out, loss] + grads


def static_steps(fluid):
    """test_dynrnn_static_input's forward: the shrunk static input of every step written to
    an array inside the loop and read back after it, with its LoD."""
    L = fluid.layers
    x = _lod_data(fluid, "x", X, grad=False)
    y = _lod_data(fluid, "y", Y, grad=False)
    steps = L.create_array("float32")
    rnn = L.DynamicRNN()
    with rnn.block():
        rnn.step_input(x)
        static = rnn.static_input(y)
        L.array_write(static, i=rnn.step_idx, array=steps)
        rnn.output(L.sequence_pool(static, "last"))
    reads = [L.array_read(steps, L.fill_constant([1], "int64", t)) for t in range(4)]
    return _feed(fluid, {"x": (X, X_LENS), "y": (Y, Y_LENS)}), reads + [rnn()]


CASES = {f.__name__: f for f in (array_ops, nested_lod, dyn_rnn, dyn_rnn_static,
                                 static_steps)}


def train_sentiment(fluid):
    """embedding -> fc -> DynamicRNN (fc step over [input, memory]) -> last step -> softmax."""
    L = fluid.layers
    words = fluid.data("words", [None, 1], "int64", lod_level=1)
    label = fluid.data("label", [None, 1], "int64")
    emb = L.embedding(words, size=[VOCAB, EMB], param_attr=_attr(fluid, "emb", EMB_T))
    rnn = L.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(emb)
        prev = rnn.memory(shape=[HID], value=0.0)
        hidden = L.fc([word, prev], size=HID, act="tanh",
                      param_attr=[_attr(fluid, "w_in", W_IN), _attr(fluid, "w_h", W_H)],
                      bias_attr=_attr(fluid, "b_h", B_H))
        rnn.update_memory(prev, hidden)
        rnn.output(hidden)
    last = L.sequence_last_step(rnn())
    pred = L.fc(last, size=CLASSES, act="softmax", param_attr=_attr(fluid, "w_out", W_OUT),
                bias_attr=_attr(fluid, "b_out", B_OUT))
    loss = L.mean(L.cross_entropy(pred, label))
    feed = _feed(fluid, {"words": (WORDS, WORDS_LENS), "label": (LABELS, None)})
    return feed, loss, ["emb", "w_in", "w_h", "b_h", "w_out", "b_out"]


def train_decoder(fluid):
    """The book's machine-translation decoder: the encoder's last state (reordered) starts the
    memory, the encoder's sequences are a static input pooled each step (a context)."""
    L = fluid.layers
    src = fluid.data("src", [None, 1], "int64", lod_level=1)
    trg = fluid.data("trg", [None, 1], "int64", lod_level=1)
    nxt = fluid.data("nxt", [None, 1], "int64", lod_level=1)
    enc = L.fc(L.embedding(src, size=[VOCAB, EMB], param_attr=_attr(fluid, "emb", EMB_T)),
               size=HID, act="tanh", param_attr=_attr(fluid, "w_enc", W_ENC), bias_attr=False)
    boot = L.sequence_last_step(enc)
    trg_emb = L.embedding(trg, size=[VOCAB, EMB], param_attr=_attr(fluid, "emb", EMB_T))
    rnn = L.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(trg_emb)
        context = L.sequence_pool(rnn.static_input(enc), "average")
        prev = rnn.memory(init=boot, need_reorder=True)
        hidden = L.fc([word, prev, context], size=HID, act="tanh",
                      param_attr=[_attr(fluid, "w_in", W_IN), _attr(fluid, "w_h", W_H),
                                  _attr(fluid, "w_ctx", W_CTX)],
                      bias_attr=_attr(fluid, "b_h", B_H))
        rnn.update_memory(prev, hidden)
        rnn.output(L.fc(hidden, size=VOCAB, act="softmax",
                        param_attr=_attr(fluid, "w_dec", W_DEC), bias_attr=False))
    loss = L.mean(L.cross_entropy(rnn(), nxt))
    feed = _feed(fluid, {"src": (WORDS, WORDS_LENS), "trg": (TRG, TRG_LENS),
                         "nxt": (TRG_NEXT, TRG_LENS)})
    return feed, loss, ["emb", "w_enc", "w_in", "w_h", "w_ctx", "b_h", "w_dec"]


def train_nested(fluid):
    """test_dyn_rnn's nested DynamicRNN: paragraphs (two LoD levels) stepped by sentence, each
    sentence's words by an inner DynamicRNN with a memory; the inner last steps classified."""
    L = fluid.layers
    words = fluid.data("words", [None, 1], "int64", lod_level=2)
    label = fluid.data("label", [None, 1], "float32", lod_level=1)
    outer = L.DynamicRNN()
    with outer.block():
        sentence = outer.step_input(words)
        emb = L.embedding(sentence, size=[VOCAB, EMB], param_attr=_attr(fluid, "emb", EMB_T))
        boot = L.sequence_pool(L.fc(emb, size=HID, param_attr=_attr(fluid, "w_enc", W_ENC),
                                    bias_attr=False), "average")
        inner = L.DynamicRNN()
        with inner.block():
            word = inner.step_input(emb)
            # (a memory from shape/value here makes fluid 1.8.5's backward fail to build)
            prev = inner.memory(init=boot, need_reorder=True)
            hidden = L.fc([word, prev], size=HID, act="tanh",
                          param_attr=[_attr(fluid, "w_in", W_IN), _attr(fluid, "w_h", W_H)],
                          bias_attr=_attr(fluid, "b_h", B_H))
            inner.update_memory(prev, hidden)
            inner.output(hidden)
        outer.output(L.sequence_last_step(inner()))
    logits = L.fc(outer(), size=1, param_attr=_attr(fluid, "w_out", W_NEST), bias_attr=False)
    loss = L.mean(L.sigmoid_cross_entropy_with_logits(logits, label))
    feed = _feed(fluid, {"words": (PARAGRAPHS, PARAGRAPHS_LENS),
                         "label": (PARAGRAPH_LABELS, [[2, 1, 3]])})
    return feed, loss, ["emb", "w_enc", "w_in", "w_h", "b_h", "w_out"]


TRAIN_CASES = {f.__name__: f for f in (train_sentiment, train_decoder, train_nested)}


def _fetched(t):
    """(value, LoD as lists of offsets) of a fetch made with return_numpy=False."""
    lod = t.lod() if hasattr(t, "lod") else []
    return [np.array(t), [list(map(int, level)) for level in lod]]


def run_case(fluid, name):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        feed, fetches = CASES[name](fluid)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed=feed, fetch_list=fetches, scope=scope, return_numpy=False)
    return [_fetched(t) for t in got]


def run_training(fluid, name, steps=4, lr=0.2):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        feed, loss, params = TRAIN_CASES[name](fluid)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [float(np.asarray(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0])
                    .reshape(-1)[0]) for _ in range(steps)]
    return {"losses": losses,
            "params": {p: np.array(scope.find_var(p).get_tensor()) for p in params}}


def main():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import paddle
    import paddle.fluid as fluid
    from oracle_io import save

    cases = {name: run_case(fluid, name) for name in CASES}
    cases.update({name: run_training(fluid, name) for name in TRAIN_CASES})
    save("dynamic_rnn", cases, {"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
