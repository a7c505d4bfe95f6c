"""Reference outputs for the sequence ops (fluid 1.8's layers/sequence_lod.py, lod_reset,
lod_append, im2sequence, row_conv and nets.sequence_conv_pool), for
tests/unit/test_ops_sequence_oracle.py.

Run it with PaddlePaddle 1.8.5's Python, from a folder outside the checkout:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_sequence.py   # data/sequence.json

Each case in CASES builds one layer on fixed inputs (LoD tensors fed with fixed recursive
sequence lengths) and stores its outputs, their LoD (offsets, as LoDTensor.lod() returns it)
and the gradients of sum(out * W) (W a fixed ramp shaped like each float output) for the
case's float inputs and every parameter (sorted by name). A case fluid refuses stores
{"error": "run"}. TRAIN_CASES store a few SGD steps of a small text classifier: embedding,
sequence_conv_pool, fc with softmax, cross entropy. run_case and run_train are shared with
the test, which runs the same programs with spmd.fluid.
"""
import os
import sys

import numpy as np

LR, STEPS = 0.5, 5


def _rng(name):
    return np.random.RandomState(sum(ord(ch) * (i + 1) for i, ch in enumerate(name)) % 10007)


def _ramp(shape, lo=-1.0, hi=1.0):
    n = int(np.prod(shape))
    return np.linspace(lo, hi, max(n, 1))[:n].reshape(shape).astype("float32")


def _floats(name, rows, *tail):
    return _rng(name).uniform(-1, 1, (rows,) + tail).astype("float32")


def _param(fluid, name, shape):
    init = fluid.initializer.NumpyArrayInitializer(_ramp(shape, -0.7, 0.9))
    return fluid.ParamAttr(name=name, initializer=init)


# A case: (feeds, build). feeds: name -> (array, recursive sequence lengths or None, whether
# its gradient is stored); build(fluid, vars, param) -> list of output variables, where
# param(name, shape) makes a ParamAttr with a fixed initial value.
def _conv(filter_size, padding_start, act=None, lengths=(2, 0, 1, 4), width=3):
    rows = sum(lengths)

    def build(fluid, v, param):
        return [fluid.layers.sequence_conv(
            v["x"], 2, filter_size=filter_size, padding_start=padding_start,
            param_attr=param("conv.w", (filter_size * width, 2)),
            bias_attr=param("conv.b", (2,)), act=act)]
    return {"x": (_floats("conv", rows, width), [list(lengths)], True)}, build


def _unary(layer, x, lengths, **kwargs):
    def build(fluid, v, param):
        out = getattr(fluid.layers, layer)(v["x"], **kwargs)
        return list(out) if isinstance(out, tuple) else [out]
    grad = x.dtype.kind == "f"
    return {"x": (x, lengths, grad)}, build


def _expand(layer, x, x_lengths, y_lengths, y_rows, **kwargs):
    def build(fluid, v, param):
        return [getattr(fluid.layers, layer)(v["x"], v["y"], **kwargs)]
    y = np.zeros((y_rows, 1), "float32")
    return {"x": (x, x_lengths, True), "y": (y, y_lengths, False)}, build


def _concat(lengths):
    feeds = {f"x{i}": (_floats(f"cat{i}", sum(ls), 2), [ls], True)
             for i, ls in enumerate(lengths)}

    def build(fluid, v, param):
        return [fluid.layers.sequence_concat([v[f"x{i}"] for i in range(len(lengths))])]
    return feeds, build


def _slice(lengths, offset, length):
    feeds = {"x": (_floats("slice", sum(lengths), 2), [lengths], True),
             "offset": (np.array(offset, "int64").reshape(-1, 1), None, False),
             "length": (np.array(length, "int64").reshape(-1, 1), None, False)}

    def build(fluid, v, param):
        return [fluid.layers.sequence_slice(v["x"], v["offset"], v["length"])]
    return feeds, build


def _pad(lengths, pad, maxlen=None, width=2):
    def build(fluid, v, param):
        pad_value = fluid.layers.assign(np.array(pad, "float32"))
        out, length = fluid.layers.sequence_pad(v["x"], pad_value, maxlen=maxlen)
        return [out, length]
    width = width if isinstance(width, tuple) else (width,)
    return {"x": (_floats("pad", sum(lengths), *width), [lengths], True)}, build


def _unpad(batch, maxlen, length):
    def build(fluid, v, param):
        return [fluid.layers.sequence_unpad(v["x"], v["length"])]
    return {"x": (_floats("unpad", batch, maxlen, 2), None, True),
            "length": (np.array(length, "int64"), None, False)}, build


def _mask(x, maxlen=None, dtype="int64", lengths=None):
    def build(fluid, v, param):
        return [fluid.layers.sequence_mask(v["x"], maxlen=maxlen, dtype=dtype)]
    return {"x": (np.array(x, "int64"), lengths, False)}, build


def _scatter(rows, width, lengths, ids):
    feeds = {"x": (_floats("scatter", rows, width), None, True),
             "ids": (np.array(ids, "int64").reshape(-1, 1), [lengths], False),
             "upd": (_floats("upd", len(ids), 1), [lengths], True)}

    def build(fluid, v, param):
        return [fluid.layers.sequence_scatter(v["x"], v["ids"], v["upd"])]
    return feeds, build


def _lod_reset(target_lod=None, y=None, y_lengths=None, append=False):
    feeds = {"x": (_floats("reset", 6, 2), [[3, 3]], True)}
    if y is not None:
        feeds["y"] = (np.asarray(y), y_lengths, False)

    def build(fluid, v, param):
        if append:
            return [fluid.layers.lod_append(v["x"], v.get("y", target_lod))]
        return [fluid.layers.lod_reset(v["x"], y=v.get("y"), target_lod=target_lod)]
    return feeds, build


def _im2seq(shape, filter_size, stride, padding, image_size=None, out_stride=1):
    feeds = {"x": (_floats("im2seq", *shape), None, True)}
    if image_size is not None:
        feeds["size"] = (np.array(image_size, "float32"), None, False)

    def build(fluid, v, param):
        return [fluid.layers.im2sequence(v["x"], filter_size=filter_size, stride=stride,
                                         padding=padding, input_image_size=v.get("size"),
                                         out_stride=out_stride)]
    return feeds, build


def _row_conv(future, lengths, width=3, act=None, batch=None):
    def build(fluid, v, param):
        return [fluid.layers.row_conv(v["x"], future, param_attr=param(
            "row.w", (future + 1, width)), act=act)]
    if batch is not None:  # a [batch, time, width] tensor without LoD
        return {"x": (_floats("row3", batch, lengths, width), None, True)}, build
    return {"x": (_floats("row", sum(lengths), width), [lengths], True)}, build


def _conv_pool(pool_type, act):
    def build(fluid, v, param):
        return [fluid.nets.sequence_conv_pool(
            v["x"], 3, 3, param_attr=param("cp.w", (6, 3)), act=act, pool_type=pool_type,
            bias_attr=param("cp.b", (3,)))]
    return {"x": (_floats("cp", 6, 2), [[2, 1, 3]], True)}, build


_SOFT = _floats("softmax", 8)
_INT = np.array([[3], [1], [4], [1], [5], [9], [2], [6]], "int64")

CASES = {
    "sequence_conv/default": _conv(3, None),
    "sequence_conv/start0": _conv(3, 0),
    "sequence_conv/start_minus2_len4": _conv(4, -2, act="tanh"),
    "sequence_conv/start1": _conv(2, 1),
    "sequence_conv/long_context": _conv(5, -3, lengths=(1, 3)),
    "sequence_softmax/flat": _unary("sequence_softmax", _SOFT, [[3, 0, 1, 4]]),
    "sequence_softmax/column": _unary("sequence_softmax", _SOFT.reshape(8, 1), [[5, 3]]),
    "sequence_softmax/two_level": _unary("sequence_softmax", _SOFT, [[2, 1], [2, 3, 3]]),
    "sequence_expand/x_plain": _expand("sequence_expand", _floats("e1", 3, 2), None,
                                       [[2, 0, 3]], 5),
    "sequence_expand/x_lod": _expand("sequence_expand", _floats("e2", 5, 2), [[2, 3]],
                                     [[1, 3]], 4),
    "sequence_expand/x_lod_zero_repeat": _expand("sequence_expand", _floats("e3", 5, 2),
                                                 [[2, 0, 3]], [[1, 2, 0]], 3),
    "sequence_expand/ref_level0": _expand("sequence_expand", _floats("e4", 5, 2), [[2, 3]],
                                          [[2, 1], [1, 1, 1]], 3, ref_level=0),
    "sequence_expand/x_plain_ref_level0": _expand("sequence_expand", _floats("e5", 2, 3),
                                                  None, [[2, 1], [1, 2, 1]], 4, ref_level=0),
    "sequence_expand_as/x_plain": _expand("sequence_expand_as", _floats("a1", 3, 2), None,
                                          [[2, 0, 3]], 5),
    "sequence_expand_as/x_lod": _expand("sequence_expand_as", _floats("a2", 3, 2),
                                        [[1, 1, 1]], [[1, 2, 2]], 5),
    "sequence_concat/two": _concat([[2, 1, 3], [1, 2, 0]]),
    "sequence_concat/three": _concat([[1, 0], [2, 2], [0, 1]]),
    "sequence_slice/basic": _slice([3, 2, 4], [0, 1, 1], [2, 1, 3]),
    "sequence_slice/empty": _slice([3, 2], [1, 2], [0, 0]),
    "sequence_pad/scalar": _pad([2, 3, 1], [0.0]),
    "sequence_pad/maxlen": _pad([2, 0, 3], [-1.5], maxlen=4),
    "sequence_pad/vector": _pad([1, 3], [0.5, -0.5]),
    "sequence_pad/wide_rows": _pad([2, 1], [0.25], width=(2, 2)),
    "sequence_unpad/basic": _unpad(3, 4, [2, 4, 1]),
    "sequence_unpad/zero_length": _unpad(3, 3, [0, 3, 1]),
    "sequence_mask/maxlen": _mask([3, 1, 0, 4], maxlen=5),
    "sequence_mask/default": _mask([[2, 0], [3, 1]]),
    "sequence_mask/float": _mask([2, 3], maxlen=3, dtype="float32"),
    "sequence_reshape/widen": _unary("sequence_reshape", _floats("rs", 6, 2), [[2, 4]],
                                     new_dim=4),
    "sequence_reshape/narrow": _unary("sequence_reshape", _floats("rs2", 3, 4), [[1, 0, 2]],
                                      new_dim=2),
    "sequence_reverse/float": _unary("sequence_reverse", _floats("rev", 6, 2), [[2, 0, 4]]),
    "sequence_reverse/int": _unary("sequence_reverse", _INT, [[3, 5]]),
    "sequence_enumerate/win2": _unary("sequence_enumerate", _INT, [[3, 5]], win_size=2),
    "sequence_enumerate/win3_pad": _unary("sequence_enumerate", _INT, [[1, 0, 7]], win_size=3,
                                          pad_value=-1),
    "sequence_scatter/basic": _scatter(3, 6, [3, 5, 4], [0, 1, 2, 5, 4, 3, 2, 1, 3, 2, 5, 4]),
    "sequence_scatter/empty": _scatter(3, 4, [2, 0, 1], [3, 0, 2]),
    "lod_reset/target": _lod_reset(target_lod=[0, 2, 6]),
    "lod_reset/y_lod": _lod_reset(y=_floats("y", 6, 1), y_lengths=[[1, 5]]),
    "lod_reset/y_data": _lod_reset(y=np.array([0, 4, 6], "int32")),
    "lod_append/list": _lod_reset(target_lod=[0, 1, 2, 3, 4, 5, 6], append=True),
    "lod_append/y_lod": _lod_reset(y=_floats("y2", 6, 1), y_lengths=[[2, 2, 2]], append=True),
    "im2sequence/basic": _im2seq((2, 2, 3, 3), 2, 1, 0),
    "im2sequence/stride_pad": _im2seq((1, 1, 4, 5), [2, 3], [2, 1], [1, 0, 1, 1]),
    "im2sequence/image_size": _im2seq((2, 1, 4, 4), 2, 2, 0, image_size=[[4, 4], [3, 2]],
                                      out_stride=[1, 1]),
    "row_conv/lod": _row_conv(2, [3, 1, 4]),
    "row_conv/act": _row_conv(1, [2, 1, 3], act="tanh"),
    "row_conv/empty_sequence": _row_conv(1, [2, 0, 3]),
    "row_conv/tensor": _row_conv(2, 4, batch=2),
    "sequence_conv_pool/max": _conv_pool("max", "sigmoid"),
    "sequence_conv_pool/sqrt_tanh": _conv_pool("sqrt", "tanh"),
}


def _data(fluid, name, array, lengths):
    shape = [-1] + list(array.shape[1:])
    return fluid.data(name, shape, str(array.dtype), lod_level=len(lengths or []))


def _feed(fluid, array, lengths):
    if lengths is None:
        return array
    return fluid.create_lod_tensor(array, lengths, fluid.CPUPlace())


def _message(e):
    """The line of a fluid error that says what is wrong."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    said = [ln for ln in lines if "Error:" in ln or "Error " in ln]
    return (said or lines or [repr(e)])[-1][:300]


def _lod(t):
    return [list(level) for level in t.lod()]


def run_case(fluid, name):
    """Build CASES[name] twice (forward, then with the weighted loss) and run both."""
    feeds_spec, build = CASES[name]

    def program(weights=None):
        prog, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(prog, startup):
            vs = {}
            for k, (a, lengths, grad) in sorted(feeds_spec.items()):
                vs[k] = _data(fluid, k, a, lengths)
                vs[k].stop_gradient = not grad
            outs = build(fluid, vs, lambda n, s: _param(fluid, n, s))
            grads = []
            if weights is not None:
                terms = []
                for i, (o, w) in enumerate(zip(outs, weights)):
                    if w is not None:
                        wv = fluid.data(f"w{i}", list(w.shape), "float32")
                        terms.append(fluid.layers.reduce_sum(o * wv))
                loss = fluid.layers.sums(terms) if len(terms) > 1 else terms[0]
                params = sorted(prog.global_block().all_parameters(), key=lambda p: p.name)
                wrt = [vs[k] for k in sorted(feeds_spec) if feeds_spec[k][2]] + params
                grads = fluid.gradients([loss], wrt)
        return prog, startup, outs, grads

    feed = {k: _feed(fluid, a, lengths) for k, (a, lengths, _) in feeds_spec.items()}
    exe = fluid.Executor(fluid.CPUPlace())
    try:
        prog, startup, outs, _ = program()
        exe.run(startup)
        got = exe.run(prog, feed=feed, fetch_list=outs, return_numpy=False)
    except Exception as e:  # noqa: BLE001 - the oracle's refusal is the stored answer
        return {"error": "run", "message": _message(e)}
    arrays = [np.array(t) for t in got]
    result = {"outs": arrays, "lods": [_lod(t) for t in got]}
    weights = [_ramp(a.shape, 0.5, 1.5) if a.dtype.kind == "f" and a.size else None
               for a in arrays]
    if not any(feeds_spec[k][2] for k in feeds_spec) or all(w is None for w in weights):
        result["grads"] = []
        return result
    prog, startup, outs, grads = program(weights)
    exe.run(startup)
    for i, w in enumerate(weights):
        if w is not None:
            feed[f"w{i}"] = w
    try:
        got = exe.run(prog, feed=feed, fetch_list=grads, return_numpy=False)
    except Exception as e:  # noqa: BLE001 - fluid 1.8.5 fails some gradients (a bug there)
        result["grad_error"] = _message(e)
        return result
    result["grads"] = [np.array(g) for g in got]
    return result


# -- training: embedding + sequence_conv_pool + fc(softmax) + cross entropy, SGD ---------------

VOCAB, EMB = 12, 4
TRAIN_CASES = {"max_sigmoid": ("max", "sigmoid"), "average_tanh": ("average", "tanh")}


def train_batch():
    r = _rng("train")
    lengths = [3, 1, 5, 2]
    words = r.randint(0, VOCAB, (sum(lengths), 1)).astype("int64")
    label = np.array([[0], [1], [1], [0]], "int64")
    return words, [lengths], label


def run_train(fluid, name):
    pool_type, act = TRAIN_CASES[name]
    words, lengths, label = train_batch()
    prog, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, startup):
        w = fluid.data("words", [-1, 1], "int64", lod_level=1)
        y = fluid.data("label", [-1, 1], "int64")
        emb = fluid.layers.embedding(w, [VOCAB, EMB], param_attr=_param(fluid, "emb",
                                                                       (VOCAB, EMB)))
        pooled = fluid.nets.sequence_conv_pool(
            emb, 5, 3, param_attr=_param(fluid, "conv.w", (3 * EMB, 5)), act=act,
            pool_type=pool_type, bias_attr=_param(fluid, "conv.b", (5,)))
        pred = fluid.layers.fc(pooled, 2, act="softmax",
                               param_attr=_param(fluid, "fc.w", (5, 2)),
                               bias_attr=_param(fluid, "fc.b", (2,)))
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
        fluid.optimizer.SGD(LR).minimize(loss)
        params = sorted(p.name for p in prog.global_block().all_parameters())
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feed = {"words": fluid.create_lod_tensor(words, lengths, fluid.CPUPlace()), "label": label}
    losses = [float(np.asarray(exe.run(prog, feed=feed, fetch_list=[loss])[0]).reshape(-1)[0])
              for _ in range(STEPS)]
    final = exe.run(prog, feed=feed, fetch_list=params)
    return {"losses": losses, "params": params, "final": [np.asarray(a) for a in final]}


def main():
    import paddle
    import paddle.fluid as fluid

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from oracle_io import save

    cases = {}
    for name in CASES:
        with fluid.unique_name.guard():
            cases[name] = run_case(fluid, name)
    for name in TRAIN_CASES:
        with fluid.unique_name.guard():
            cases["train/" + name] = run_train(fluid, name)
    save("sequence", cases, meta={"paddle": paddle.__version__})


if __name__ == "__main__":
    main()
