"""Reference outputs of fluid 1.8.5 for the LoD recurrent and structured-loss layers, for
tests/unit/test_sequence_rnn_oracle.py (dynamic_lstm, dynamic_lstmp, dynamic_gru),
tests/unit/test_crf_oracle.py (linear_chain_crf, crf_decoding, chunk_eval) and
tests/unit/test_ctc_oracle.py (warpctc, ctc_greedy_decoder, edit_distance).

Run it with fluid 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_sequence_rnn.py

Every parameter is set by NumpyArrayInitializer and every input is fixed, so spmd runs the
same programs (the run_* functions here, shared with the tests) and must fetch the same
numbers: layer outputs and the gradients of a fixed loss for the inputs and every parameter,
and the losses of a few SGD steps of a small model per family.
"""
import os
import sys

import numpy as np

LR, STEPS = 0.3, 4

# name -> (layer, lengths, hidden, keyword arguments; "h0"/"c0": feed initial states)
RNN_CASES = {
    "lstm_default": ("lstm", [2, 3, 1], 3, {}),
    "lstm_plain_reverse": ("lstm", [3, 1, 2], 3, {"use_peepholes": False, "is_reverse": True}),
    "lstm_states": ("lstm", [2, 3], 4, {"h0": True, "c0": True}),
    "lstm_activations": ("lstm", [2, 2, 3], 3, {"gate_activation": "tanh",
                                               "cell_activation": "relu",
                                               "candidate_activation": "identity"}),
    "lstmp_default": ("lstmp", [2, 3, 1], 3, {"proj_size": 2}),
    "lstmp_clip_reverse": ("lstmp", [3, 2], 4, {"proj_size": 3, "cell_clip": 0.3,
                                                 "proj_clip": 0.25, "is_reverse": True,
                                                 "h0": True, "c0": True}),
    "lstmp_proj_identity": ("lstmp", [1, 3], 3, {"proj_size": 2, "proj_activation": "identity",
                                                  "use_peepholes": False}),
    "lstmp_proj_relu": ("lstmp", [2, 2], 3, {"proj_size": 2, "proj_activation": "relu"}),
    "gru_default": ("gru", [2, 3, 1], 3, {}),
    "gru_origin_reverse_h0": ("gru", [3, 1, 2], 4, {"origin_mode": True, "is_reverse": True,
                                                     "h0": True}),
    "gru_activations": ("gru", [2, 2], 3, {"gate_activation": "tanh",
                                           "candidate_activation": "relu"}),
}


def _rng(name):
    return np.random.RandomState(sum(ord(ch) * (i + 1) for i, ch in enumerate(name)) % 10007)


def _weight(shape):
    return np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)


def _init(fluid, value, name=None):
    return fluid.ParamAttr(name=name, initializer=fluid.initializer.NumpyArrayInitializer(
        np.asarray(value, dtype="float32")))


def _feed(fluid, feeds, lods):
    """Arrays, the ones named in `lods` as LoD tensors with those sequence lengths."""
    out = {}
    for k, a in feeds.items():
        out[k] = fluid.create_lod_tensor(a, [lods[k]], fluid.CPUPlace()) if k in lods else a
    return out


# -- dynamic_lstm / dynamic_lstmp / dynamic_gru ------------------------------------------------

def rnn_inputs(name):
    layer, lengths, hidden, kw = RNN_CASES[name]
    r = _rng(name)
    n, m = len(lengths), 3
    gates = {"lstm": 4, "lstmp": 4, "gru": 3}[layer]
    rec = kw.get("proj_size", hidden)
    feeds = {"x": r.uniform(-1, 1, (sum(lengths), m)).astype("float32")}
    if kw.get("h0"):
        feeds["h0"] = r.uniform(-1, 1, (n, rec)).astype("float32")
    if kw.get("c0"):
        feeds["c0"] = r.uniform(-1, 1, (n, hidden)).astype("float32")
    peep = kw.get("use_peepholes", True) and layer != "gru"
    params = {"fc": r.uniform(-0.6, 0.6, (m, gates * hidden)),
              "w": r.uniform(-0.6, 0.6, (rec, gates * hidden)),
              "b": r.uniform(-0.4, 0.4, (1, (7 if peep else gates) * hidden))}
    if layer == "lstmp":
        params["proj"] = r.uniform(-0.8, 0.8, (hidden, rec))
    return feeds, params


def run_rnn(fluid, name):
    layer, lengths, hidden, kw = RNN_CASES[name]
    feeds, params = rnn_inputs(name)
    kw = dict(kw)
    kw.pop("h0", None)
    kw.pop("c0", None)

    def build(vs):
        proj = fluid.layers.fc(vs["x"], params["fc"].shape[1], param_attr=_init(fluid, params[
            "fc"]), bias_attr=False)
        states = {k: vs[k] for k in ("h0", "c0") if k in vs}
        if layer == "gru":
            h = fluid.layers.dynamic_gru(proj, hidden, param_attr=_init(fluid, params["w"]),
                                         bias_attr=_init(fluid, params["b"]),
                                         h_0=states.get("h0"), **kw)
            outs = [h]
        elif layer == "lstm":
            outs = list(fluid.layers.dynamic_lstm(
                proj, 4 * hidden, param_attr=_init(fluid, params["w"]),
                bias_attr=_init(fluid, params["b"]), h_0=states.get("h0"),
                c_0=states.get("c0"), **kw))
        else:
            # fluid gives both weights one param_attr, so they are set after startup
            outs = list(fluid.layers.dynamic_lstmp(
                proj, 4 * hidden, kw.pop("proj_size"), bias_attr=_init(fluid, params["b"]),
                h_0=states.get("h0"), c_0=states.get("c0"), **kw))
            overrides.update({"lstmp_0.w_0": params["w"], "lstmp_0.w_1": params["proj"]})
        loss_w = _weight(tuple(int(v) for v in (sum(lengths), outs[0].shape[1])))
        loss = fluid.layers.reduce_sum(outs[0] * fluid.layers.assign(
            loss_w.astype("float32")))
        return outs, loss

    overrides = {}
    return run_program(fluid, build, feeds, {"x": lengths},
                       ["x"] + [k for k in ("h0", "c0") if k in feeds], overrides)


def run_program(fluid, build, feeds, lods, wrt, overrides=None):
    """Build (outs, loss) under fresh programs and run them once: outs (arrays and their LoD)
    and d loss / d (the feeds in `wrt`, every parameter by name); parameters named in
    `overrides` (which build may fill) are set after the startup program."""
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        vs = {}
        for k, a in sorted(feeds.items()):
            # a batch dim of -1 everywhere: fluid's dynamic_lstm asserts h_0's shape against
            # the input's
            vs[k] = fluid.data(k, [-1] + list(a.shape[1:]), str(a.dtype),
                               lod_level=1 if k in lods else 0)
            vs[k].stop_gradient = k not in wrt
        outs, loss = build(vs)
        params = sorted(prog.global_block().all_parameters(), key=lambda p: p.name)
        grads = fluid.gradients([loss], [vs[k] for k in sorted(wrt)] + params) \
            if loss is not None else []
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for pname, value in (overrides or {}).items():
            scope.find_var(pname).get_tensor().set(np.asarray(value, "float32"),
                                                   fluid.CPUPlace())
        got = exe.run(prog, feed=_feed(fluid, feeds, lods),
                      fetch_list=list(outs) + list(grads), return_numpy=False)
    arrays = [np.array(t) for t in got]
    return {"outs": arrays[: len(outs)], "grads": arrays[len(outs):],
            "out_lods": [t.recursive_sequence_lengths() for t in got[: len(outs)]],
            "params": [[p.name, [int(d) for d in p.shape]] for p in params]}


def train_classifier(fluid):
    """An LSTM text classifier (embedding -> fc -> dynamic_lstm -> max pool + last step, and
    a dynamic_gru branch -> fc softmax -> cross entropy), SGD steps; returns the losses."""
    r = _rng("classifier")
    vocab, emb, hid, classes = 12, 5, 4, 3
    lengths = [3, 5, 2, 4]
    words = r.randint(0, vocab, (sum(lengths), 1)).astype("int64")
    label = r.randint(0, classes, (len(lengths), 1)).astype("int64")
    init = {"emb": r.uniform(-0.5, 0.5, (vocab, emb)),
            "fc_lstm": r.uniform(-0.5, 0.5, (emb, 4 * hid)),
            "lstm_w": r.uniform(-0.5, 0.5, (hid, 4 * hid)),
            "lstm_b": r.uniform(-0.2, 0.2, (1, 7 * hid)),
            "fc_gru": r.uniform(-0.5, 0.5, (emb, 3 * hid)),
            "gru_w": r.uniform(-0.5, 0.5, (hid, 3 * hid)),
            "gru_b": r.uniform(-0.2, 0.2, (1, 3 * hid)),
            "out": r.uniform(-0.5, 0.5, (3 * hid, classes))}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        w = fluid.data("words", [-1, 1], "int64", lod_level=1)
        y = fluid.data("label", [-1, 1], "int64")
        e = fluid.layers.embedding(w, [vocab, emb], param_attr=_init(fluid, init["emb"]))
        p = fluid.layers.fc(e, 4 * hid, param_attr=_init(fluid, init["fc_lstm"]),
                            bias_attr=False)
        h, _ = fluid.layers.dynamic_lstm(p, 4 * hid, param_attr=_init(fluid, init["lstm_w"]),
                                         bias_attr=_init(fluid, init["lstm_b"]))
        g = fluid.layers.dynamic_gru(
            fluid.layers.fc(e, 3 * hid, param_attr=_init(fluid, init["fc_gru"]),
                            bias_attr=False), hid, param_attr=_init(fluid, init["gru_w"]),
            bias_attr=_init(fluid, init["gru_b"]), is_reverse=True)
        feat = fluid.layers.concat([fluid.layers.sequence_pool(h, "max"),
                                    fluid.layers.sequence_last_step(h),
                                    fluid.layers.sequence_pool(g, "average")], axis=1)
        pred = fluid.layers.fc(feat, classes, act="softmax",
                               param_attr=_init(fluid, init["out"]), bias_attr=False)
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
        fluid.optimizer.SGD(LR).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"words": fluid.create_lod_tensor(words, [lengths], fluid.CPUPlace()),
            "label": label}
    return [float(np.asarray(exe.run(prog, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
            for _ in range(STEPS)]


# -- linear_chain_crf / crf_decoding / chunk_eval -----------------------------------------------

# name -> (lengths, tags, padded)
CRF_CASES = {"lod": ([3, 1, 4], 5, False), "lod_long": ([7, 5], 3, False),
             "padded": ([3, 4, 1], 3, True)}
# name -> (scheme, chunk types, lengths, excluded, padded)
CHUNK_CASES = {
    "IOB": ("IOB", 3, [9, 4, 12, 3], [], False),
    "IOE": ("IOE", 2, [7, 8, 5], [], False),
    "IOBES": ("IOBES", 2, [10, 6, 9], [], False),
    "plain": ("plain", 3, [8, 8], [], False),
    "IOB_excluded": ("IOB", 3, [9, 7], [1], False),
    "IOBES_padded": ("IOBES", 2, [6, 3, 8], [], True),
}
TAG_TYPES = {"IOB": 2, "IOE": 2, "IOBES": 4, "plain": 1}


def crf_inputs(name):
    lengths, d, padded = CRF_CASES[name]
    r = _rng("crf" + name)
    t, m = sum(lengths), 3
    x = r.uniform(-1, 1, (t, m)).astype("float32")
    y = r.randint(0, d, (t, 1)).astype("int64")
    params = {"fc": r.uniform(-1, 1, (m, d)), "crfw": r.uniform(-0.8, 0.8, (d + 2, d))}
    if not padded:
        return {"x": x, "y": y}, params
    n, tmax = len(lengths), max(lengths)
    px, py = np.zeros((n, tmax, m), "float32"), np.zeros((n, tmax), "int64")
    off = 0
    for i, k in enumerate(lengths):
        px[i, :k], py[i, :k] = x[off: off + k], y[off: off + k, 0]
        off += k
    return {"x": px, "y": py, "len": np.array(lengths, "int64")}, params


def run_crf(fluid, name):
    """fc emission -> linear_chain_crf, crf_decoding (with and without label), chunk_eval."""
    lengths, d, padded = CRF_CASES[name]
    feeds, params = crf_inputs(name)

    def build(vs):
        em = fluid.layers.fc(vs["x"], d, num_flatten_dims=2 if padded else 1,
                             param_attr=_init(fluid, params["fc"]), bias_attr=False)
        length = vs.get("len")
        ll = fluid.layers.linear_chain_crf(em, vs["y"], _init(fluid, params["crfw"], "crfw"),
                                           length=length)
        path = fluid.layers.crf_decoding(em, fluid.ParamAttr(name="crfw"), length=length)
        hit = fluid.layers.crf_decoding(em, fluid.ParamAttr(name="crfw"), label=vs["y"],
                                        length=length)
        ev = fluid.layers.chunk_eval(path, vs["y"], "IOB", (d - 1) // 2 or 1,
                                     seq_length=length)
        loss_w = _weight((len(lengths), 1)).astype("float32")
        loss = fluid.layers.reduce_sum(ll * fluid.layers.assign(loss_w))
        return [ll, path, hit] + list(ev), loss

    lods = {} if padded else {"x": lengths, "y": lengths}
    return run_program(fluid, build, feeds, lods, ["x"])


def chunk_inputs(name):
    scheme, types, lengths, _, padded = CHUNK_CASES[name]
    r = _rng("chunk" + name)
    top = types * TAG_TYPES[scheme] + 1
    label = r.randint(0, top, (sum(lengths), 1)).astype("int64")
    infer = label.copy()
    flip = r.uniform(0, 1, label.shape) < 0.3
    infer[flip] = r.randint(0, top, int(flip.sum()))
    if not padded:
        return {"infer": infer, "label": label}
    n, t = len(lengths), max(lengths)
    pi, pl = np.zeros((n, t), "int64"), np.zeros((n, t), "int64")
    off = 0
    for i, k in enumerate(lengths):
        pi[i, :k], pl[i, :k] = infer[off: off + k, 0], label[off: off + k, 0]
        off += k
    return {"infer": pi, "label": pl, "len": np.array(lengths, "int64")}


def run_chunk(fluid, name):
    scheme, types, lengths, excluded, padded = CHUNK_CASES[name]
    feeds = chunk_inputs(name)

    def build(vs):
        return list(fluid.layers.chunk_eval(vs["infer"], vs["label"], scheme, types,
                                            excluded_chunk_types=excluded,
                                            seq_length=vs.get("len"))), None

    lods = {} if padded else {"infer": lengths, "label": lengths}
    return run_program(fluid, build, feeds, lods, [])


def train_tagger(fluid):
    """The book's label_semantic_roles, simplified: word and predicate embeddings -> fc ->
    dynamic_lstm (forward) and dynamic_lstm (reverse) -> fc emission -> linear_chain_crf,
    trained with SGD; crf_decoding + chunk_eval (IOB) every step. Returns per step the loss
    and the chunk counts."""
    r = _rng("tagger")
    vocab, emb, hid, labels = 15, 4, 3, 7  # 7 labels: 3 chunk types in IOB + outside
    lengths = [5, 3, 6, 4]
    t = sum(lengths)
    words = r.randint(0, vocab, (t, 1)).astype("int64")
    pred = r.randint(0, vocab, (t, 1)).astype("int64")
    target = r.randint(0, labels, (t, 1)).astype("int64")
    init = {"emb": r.uniform(-0.5, 0.5, (vocab, emb)),
            "pemb": r.uniform(-0.5, 0.5, (vocab, emb)),
            "fc_w": r.uniform(-0.5, 0.5, (emb, 4 * hid)),
            "fc_p": r.uniform(-0.5, 0.5, (emb, 4 * hid)),
            "l1_w": r.uniform(-0.5, 0.5, (hid, 4 * hid)),
            "l1_b": r.uniform(-0.2, 0.2, (1, 7 * hid)),
            "fc_r": r.uniform(-0.5, 0.5, (hid, 4 * hid)),
            "l2_w": r.uniform(-0.5, 0.5, (hid, 4 * hid)),
            "l2_b": r.uniform(-0.2, 0.2, (1, 7 * hid)),
            "em_a": r.uniform(-0.5, 0.5, (hid, labels)),
            "em_b": r.uniform(-0.5, 0.5, (hid, labels)),
            "crfw": r.uniform(-0.3, 0.3, (labels + 2, labels))}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        w = fluid.data("word", [-1, 1], "int64", lod_level=1)
        p = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        y = fluid.data("target", [-1, 1], "int64", lod_level=1)
        we = fluid.layers.embedding(w, [vocab, emb], param_attr=_init(fluid, init["emb"]))
        pe = fluid.layers.embedding(p, [vocab, emb], param_attr=_init(fluid, init["pemb"]))
        hidden0 = fluid.layers.sums([
            fluid.layers.fc(we, 4 * hid, param_attr=_init(fluid, init["fc_w"]),
                            bias_attr=False),
            fluid.layers.fc(pe, 4 * hid, param_attr=_init(fluid, init["fc_p"]),
                            bias_attr=False)])
        l1, _ = fluid.layers.dynamic_lstm(hidden0, 4 * hid,
                                          param_attr=_init(fluid, init["l1_w"]),
                                          bias_attr=_init(fluid, init["l1_b"]))
        l2, _ = fluid.layers.dynamic_lstm(
            fluid.layers.fc(l1, 4 * hid, param_attr=_init(fluid, init["fc_r"]),
                            bias_attr=False), 4 * hid, is_reverse=True,
            param_attr=_init(fluid, init["l2_w"]), bias_attr=_init(fluid, init["l2_b"]))
        emission = fluid.layers.sums([
            fluid.layers.fc(l1, labels, param_attr=_init(fluid, init["em_a"]),
                            bias_attr=False),
            fluid.layers.fc(l2, labels, param_attr=_init(fluid, init["em_b"]),
                            bias_attr=False)])
        crf_cost = fluid.layers.linear_chain_crf(emission, y,
                                                 _init(fluid, init["crfw"], "crfw"))
        loss = fluid.layers.mean(crf_cost)
        fluid.optimizer.SGD(LR).minimize(loss)
        decoded = fluid.layers.crf_decoding(emission, fluid.ParamAttr(name="crfw"))
        counts = fluid.layers.chunk_eval(decoded, y, "IOB", (labels - 1) // 2)[3:]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    place = fluid.CPUPlace()
    feed = {k: fluid.create_lod_tensor(a, [lengths], place)
            for k, a in (("word", words), ("pred", pred), ("target", target))}
    losses, chunks = [], []
    for _ in range(STEPS + 2):
        got = exe.run(prog, feed=feed, fetch_list=[loss] + list(counts))
        losses.append(float(np.asarray(got[0]).reshape(-1)[0]))
        chunks.append([int(np.asarray(c).reshape(-1)[0]) for c in got[1:]])
    return {"losses": losses, "chunks": chunks}


# -- warpctc / ctc_greedy_decoder / edit_distance ----------------------------------------------

# name -> (logit lengths, label lengths, classes incl. blank, blank, norm_by_times, padded)
CTC_CASES = {
    "lod": ([5, 3, 6], [2, 1, 3], 5, 0, False, False),
    "lod_norm_blank_last": ([4, 6], [2, 3], 4, 3, True, False),
    "lod_too_long_label": ([2, 5], [3, 2], 4, 0, False, False),
    "padded": ([5, 3, 6], [2, 1, 3], 5, 0, False, True),
    "padded_norm": ([4, 2], [1, 2], 4, 1, True, True),
}


def ctc_inputs(name):
    lengths, llen, c, blank, _, padded = CTC_CASES[name]
    r = _rng("ctc" + name)
    m = 3
    x = r.uniform(-1, 1, (sum(lengths), m)).astype("float32")
    choices = [k for k in range(c) if k != blank]
    y = np.array([choices[i] for i in r.randint(0, len(choices), sum(llen))],
                 "int32").reshape(-1, 1)
    params = {"fc": r.uniform(-1.5, 1.5, (m, c))}
    if not padded:
        return {"x": x, "y": y}, params
    n, t, lmax = len(lengths), max(lengths), max(llen)
    px, py = np.zeros((t, n, m), "float32"), np.zeros((n, lmax), "int32")
    off = loff = 0
    for i, (k, j) in enumerate(zip(lengths, llen)):
        px[:k, i], py[i, :j] = x[off: off + k], y[loff: loff + j, 0]
        off, loff = off + k, loff + j
    return {"x": px, "y": py, "xl": np.array(lengths, "int64"),
            "yl": np.array(llen, "int64")}, params


def run_ctc(fluid, name):
    """fc logits -> warpctc (loss and its gradients), and the greedy decoding of the same
    logits with its edit distance to the label (LoD form)."""
    lengths, llen, c, blank, norm, padded = CTC_CASES[name]
    feeds, params = ctc_inputs(name)

    def build(vs):
        logits = fluid.layers.fc(vs["x"], c, num_flatten_dims=2 if padded else 1,
                                 param_attr=_init(fluid, params["fc"]), bias_attr=False)
        loss = fluid.layers.warpctc(logits, vs["y"], blank=blank, norm_by_times=norm,
                                    input_length=vs.get("xl"), label_length=vs.get("yl"))
        outs = [loss]
        if not padded:
            decoded = fluid.layers.ctc_greedy_decoder(fluid.layers.softmax(logits), blank)
            dist, num = fluid.layers.edit_distance(
                decoded, fluid.layers.cast(vs["y"], "int64"), normalized=False)
            outs += [decoded, dist, num]
        loss_w = _weight((len(lengths), 1)).astype("float32") + 2.0
        return outs, fluid.layers.reduce_sum(loss * fluid.layers.assign(loss_w))

    lods = {} if padded else {"x": lengths, "y": llen}
    return run_program(fluid, build, feeds, lods, ["x"])


# name -> (hyp lengths, ref lengths, normalized, ignored tokens, padded)
EDIT_CASES = {
    "lod": ([4, 0, 6, 3], [3, 2, 5, 3], False, None, False),
    "lod_normalized_ignored": ([5, 4, 3], [4, 6, 2], True, [2], False),
    "padded": ([4, 2, 5], [3, 5, 5], True, None, True),
}


def edit_inputs(name):
    hl, rl, _, _, padded = EDIT_CASES[name]
    r = _rng("edit" + name)
    h = r.randint(0, 4, (sum(hl), 1)).astype("int64")
    ref = r.randint(0, 4, (sum(rl), 1)).astype("int64")
    if not padded:
        return {"h": h, "r": ref}
    n = len(hl)
    ph, pr = np.zeros((n, max(hl)), "int64"), np.zeros((n, max(rl)), "int64")
    ho = ro = 0
    for i, (a, b) in enumerate(zip(hl, rl)):
        ph[i, :a], pr[i, :b] = h[ho: ho + a, 0], ref[ro: ro + b, 0]
        ho, ro = ho + a, ro + b
    return {"h": ph, "r": pr, "hl": np.array(hl, "int64"), "rl": np.array(rl, "int64")}


def run_edit(fluid, name):
    hl, rl, normalized, ignored, padded = EDIT_CASES[name]
    feeds = edit_inputs(name)

    def build(vs):
        return list(fluid.layers.edit_distance(vs["h"], vs["r"], normalized=normalized,
                                               ignored_tokens=ignored,
                                               input_length=vs.get("hl"),
                                               label_length=vs.get("rl"))), None

    lods = {} if padded else {"h": hl, "r": rl}
    return run_program(fluid, build, feeds, lods, [])


def train_ctc(fluid):
    """A small CTC recognizer: frame features -> fc -> dynamic_gru -> fc logits -> warpctc,
    SGD steps; greedy decoding and its edit distance each step. Returns the losses and the
    summed distances."""
    r = _rng("ctc_train")
    m, hid, classes = 4, 5, 5  # classes include the blank 0
    lengths, llen = [6, 4, 7], [2, 1, 3]
    x = r.uniform(-1, 1, (sum(lengths), m)).astype("float32")
    y = r.randint(1, classes, (sum(llen), 1)).astype("int32")
    init = {"fc_in": r.uniform(-0.6, 0.6, (m, 3 * hid)),
            "gru_w": r.uniform(-0.6, 0.6, (hid, 3 * hid)),
            "gru_b": r.uniform(-0.2, 0.2, (1, 3 * hid)),
            "fc_out": r.uniform(-0.8, 0.8, (hid, classes)),
            "fc_b": r.uniform(-0.2, 0.2, (classes,))}
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        xv = fluid.data("x", [-1, m], "float32", lod_level=1)
        yv = fluid.data("y", [-1, 1], "int32", lod_level=1)
        h = fluid.layers.dynamic_gru(
            fluid.layers.fc(xv, 3 * hid, param_attr=_init(fluid, init["fc_in"]),
                            bias_attr=False), hid, param_attr=_init(fluid, init["gru_w"]),
            bias_attr=_init(fluid, init["gru_b"]))
        logits = fluid.layers.fc(h, classes, param_attr=_init(fluid, init["fc_out"]),
                                 bias_attr=_init(fluid, init["fc_b"]))
        loss = fluid.layers.mean(fluid.layers.warpctc(logits, yv, blank=0,
                                                      norm_by_times=True))
        fluid.optimizer.SGD(LR).minimize(loss)
        decoded = fluid.layers.ctc_greedy_decoder(fluid.layers.softmax(logits), 0)
        dist, _ = fluid.layers.edit_distance(decoded, fluid.layers.cast(yv, "int64"),
                                             normalized=False)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    place = fluid.CPUPlace()
    feed = {"x": fluid.create_lod_tensor(x, [lengths], place),
            "y": fluid.create_lod_tensor(y, [llen], place)}
    losses, dists = [], []
    for _ in range(STEPS + 2):
        got = exe.run(prog, feed=feed, fetch_list=[loss, dist])
        losses.append(float(np.asarray(got[0]).reshape(-1)[0]))
        dists.append(float(np.asarray(got[1]).sum()))
    return {"losses": losses, "distances": dists}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    def fresh(fn, *args):  # every case names its layers from _0
        with fluid.unique_name.guard():
            return fn(fluid, *args)

    cases = {"rnn/" + k: fresh(run_rnn, k) for k in RNN_CASES}
    cases["train/classifier"] = fresh(train_classifier)
    cases.update({"crf/" + k: fresh(run_crf, k) for k in CRF_CASES})
    cases.update({"chunk/" + k: fresh(run_chunk, k) for k in CHUNK_CASES})
    cases["train/tagger"] = fresh(train_tagger)
    cases.update({"ctc/" + k: fresh(run_ctc, k) for k in CTC_CASES})
    cases.update({"edit/" + k: fresh(run_edit, k) for k in EDIT_CASES})
    cases["train/ctc"] = fresh(train_ctc)
    save("sequence_rnn", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
