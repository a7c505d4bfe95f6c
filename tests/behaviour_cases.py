"""Programs whose behaviour must be fluid 1.8.5's (issue 22): each case takes the `fluid` module
(paddle.fluid in tests/oracle/make_behaviours.py, spmd.fluid in
tests/unit/test_fluid_behaviours.py) and returns what it observed, as plain JSON-able values,
so the oracle and the test run the very same code. Python 3.7 syntax (the oracle runs it).
"""
import numpy as np


def _summary(value):
    """What a fetched value or fed tensor looks like: its shape, dtype and LoD."""
    arr = np.array(value)
    lod = value.lod() if hasattr(value, "lod") else []
    return {"shape": list(arr.shape), "dtype": arr.dtype.name,
            "lod": [list(level) for level in lod]}


# -- DataFeeder: the shape of every column for each shape / lod_level combination ----------

FEEDER_VARS = [
    # (name, shape given to fluid.data, lod_level, one sample's value for k = 0, 1)
    ("seq_none", [None], 1, lambda k: [1, 2, 3][:k + 1]),
    ("seq_none_rows", [None], 1, lambda k: [[1]] * (k + 1)),
    ("seq_col", [None, 1], 1, lambda k: [[1]] * (k + 1)),
    ("seq_col_flat", [None, 1], 1, lambda k: [4, 5][:k + 1]),
    ("seq_wide", [None, 3], 1, lambda k: [[1, 2, 3]] * (k + 1)),
    ("seq_unknown2", [None, None], 1, lambda k: [[1, 2]] * (k + 1)),
    ("seq_two_levels", [None], 2, lambda k: [[1, 2], [3]]),
    ("dense_none", [None], 0, lambda k: 5),
    ("dense_col", [None, 1], 0, lambda k: [5]),
    ("dense_col_scalar", [None, 1], 0, lambda k: 7),
    ("dense_3d", [None, 2, 3], 0, lambda k: np.ones((2, 3)) * k),
    ("dense_3d_flat", [None, 2, 3], 0, lambda k: list(range(6))),
    ("dense_unknown2", [None, None], 0, lambda k: [1, 2]),
]
LAYERS_DATA_VARS = [
    # fluid.layers.data (batch dim appended): (shape, lod_level, sample)
    ([1], 1, lambda k: [1] * (k + 1)),
    ([1], 0, lambda k: 5),
    ([3], 1, lambda k: [[1, 2, 3]] * (k + 1)),
    ([2, 3], 0, lambda k: np.ones((2, 3))),
    ([-1], 1, lambda k: [1, 2, 3][:k + 1]),
]


def feeder_shapes(fluid):
    """DataFeeder.feed of two samples: each column's shape, dtype and LoD."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        feed_list = [fluid.data(name=n, shape=s, lod_level=lv, dtype="int64")
                     for n, s, lv, _ in FEEDER_VARS]
        feed_list += [fluid.layers.data(name=f"layers_data_{i}", shape=s, lod_level=lv,
                                        dtype="int64")
                      for i, (s, lv, _) in enumerate(LAYERS_DATA_VARS)]
        makers = [m for _, _, _, m in FEEDER_VARS] + [m for _, _, m in LAYERS_DATA_VARS]
        feeder = fluid.DataFeeder(feed_list=feed_list, place=fluid.CPUPlace())
        samples = [tuple(m(k) for m in makers) for k in range(2)]
        fed = feeder.feed(samples)
    out = {"var_shapes": {v.name: list(v.shape) for v in feed_list}}
    out["fed"] = {name: _summary(value) for name, value in fed.items()}
    return out


# -- LoD through the ops whose InferShape shares it ------------------------------------------

def _lod_cases(L):
    def first_col(x2):
        return L.slice(x2, axes=[1], starts=[0], ends=[1])

    return {
        "squeeze": lambda x3, x2: L.squeeze(x3, axes=[1]),
        "squeeze_all": lambda x3, x2: L.squeeze(x3, axes=[]),
        "unsqueeze": lambda x3, x2: L.unsqueeze(x2, axes=[1]),
        "unsqueeze_rows": lambda x3, x2: L.unsqueeze(x2, axes=[0]),
        "squeeze_rows": lambda x3, x2: L.squeeze(L.unsqueeze(x2, axes=[0]), axes=[0]),
        "reshape": lambda x3, x2: L.reshape(x2, shape=[-1, 2, 2]),
        "reshape_zero": lambda x3, x2: L.reshape(x2, shape=[0, 4]),
        "reshape_rows": lambda x3, x2: L.reshape(x2, shape=[-1, 2]),
        "cast": lambda x3, x2: L.cast(x2, "float64"),
        "scale": lambda x3, x2: L.scale(x2, scale=2.0),
        "transpose": lambda x3, x2: L.transpose(x3, perm=[0, 2, 1]),
        "flatten": lambda x3, x2: L.flatten(x3, axis=1),
        "fc": lambda x3, x2: L.fc(x2, size=3),
        "fc_3d": lambda x3, x2: L.fc(x3, size=3, num_flatten_dims=2),
        "softmax": lambda x3, x2: L.softmax(x2),
        "concat": lambda x3, x2: L.concat([x2, x2], axis=1),
        "sum": lambda x3, x2: L.sum([x2, x2]),
        "stack": lambda x3, x2: L.stack([x2, x2], axis=1),
        "split": lambda x3, x2: L.split(x2, 2, dim=1)[0],
        "slice": lambda x3, x2: L.slice(x2, axes=[1], starts=[0], ends=[2]),
        "strided_slice": lambda x3, x2: L.strided_slice(x2, axes=[1], starts=[0], ends=[4],
                                                        strides=[2]),
        "pad": lambda x3, x2: L.pad(x2, [0, 0, 1, 1]),
        "pad2d": lambda x3, x2: L.pad2d(L.reshape(x2, [-1, 1, 2, 2]), [1, 1, 1, 1]),
        "pad_constant_like": lambda x3, x2: L.pad_constant_like(
            x2, L.slice(x2, axes=[1], starts=[0], ends=[2])),
        "gather": lambda x3, x2: L.gather(x2, L.assign(np.array([0, 1], "int32"))),
        "reduce_sum_keep": lambda x3, x2: L.reduce_sum(x2, dim=1, keep_dim=True),
        "reduce_mean": lambda x3, x2: L.reduce_mean(x2, dim=1),
        "one_hot": lambda x3, x2: L.one_hot(L.cast(first_col(x2), "int64"), 5),
        "cos_sim": lambda x3, x2: L.cos_sim(x2, x2),
        "topk": lambda x3, x2: L.topk(x2, 2)[0],
        "argmax": lambda x3, x2: L.argmax(x2, axis=1),
        "square_error_cost": lambda x3, x2: L.square_error_cost(x2, x2 * 0.5),
        "huber_loss": lambda x3, x2: L.huber_loss(
            first_col(x2), L.slice(x2, axes=[1], starts=[1], ends=[2]), 1.0),
        "log_loss": lambda x3, x2: L.log_loss(
            L.sigmoid(first_col(x2)), L.slice(x2, axes=[1], starts=[1], ends=[2])),
        "greater_than": lambda x3, x2: L.greater_than(x2, x2),
        "logical_not": lambda x3, x2: L.logical_not(L.greater_than(x2, x2)),
        "sampling_id": lambda x3, x2: L.sampling_id(L.softmax(x2)),
        "group_norm": lambda x3, x2: L.group_norm(L.reshape(x2, [-1, 4, 1, 1]), groups=2),
        "conv2d": lambda x3, x2: L.conv2d(L.reshape(x2, [-1, 1, 2, 2]), 2, 1),
        "pool2d": lambda x3, x2: L.pool2d(L.reshape(x2, [-1, 1, 2, 2]), 2),
        "lrn": lambda x3, x2: L.lrn(L.reshape(x2, [-1, 4, 1, 1])),
        "sequence_softmax_after_slice": lambda x3, x2: L.sequence_softmax(first_col(x2)),
        "fill_constant_batch_size_like": lambda x3, x2: L.fill_constant_batch_size_like(
            x2, [-1, 3], "float32", 1.0),
    }


LOD_CASE_NAMES = sorted(_lod_cases(None))


def lod_sharing(fluid, name):
    """One op on a LoD input (2 sequences, 5 rows): its output's lod_level and shape at build
    time, and the LoD and shape it is fetched with."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x2 = fluid.data(name="x2", shape=[None, 4], dtype="float32", lod_level=1)
        x3 = fluid.data(name="x3", shape=[None, 1, 4], dtype="float32", lod_level=1)
        y = _lod_cases(fluid.layers)[name](x3, x2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    d = np.arange(20, dtype="float32").reshape(5, 4) / 20
    feed = {"x2": fluid.create_lod_tensor(d, [[2, 3]], fluid.CPUPlace()),
            "x3": fluid.create_lod_tensor(d.reshape(5, 1, 4), [[2, 3]], fluid.CPUPlace())}
    got = exe.run(main, feed=feed, fetch_list=[y], return_numpy=False)[0]
    return {"lod_level": y.lod_level, "shape": list(y.shape), "fetched": _summary(got)}


def sequence_conv_after_squeeze(fluid):
    """The idiom of the issue: fluid.embedding of [N, 1] ids with LoD, squeezed to [N, D],
    then sequence_conv and sequence_pool (constant weights, so the numbers are fluid's)."""
    const = fluid.initializer.Constant
    table = np.linspace(-1.0, 1.0, 40).astype("float32").reshape(10, 4)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data(name="ids", shape=[None, 1], dtype="int64", lod_level=1)
        emb = fluid.embedding(ids, size=[10, 4], param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.NumpyArrayInitializer(table)))
        sq = fluid.layers.squeeze(emb, axes=[1])
        conv = fluid.layers.sequence_conv(sq, num_filters=3, filter_size=3,
                                          param_attr=fluid.ParamAttr(initializer=const(0.2)))
        pooled = fluid.layers.sequence_pool(conv, "sum")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ids_v = np.array([[1], [2], [3], [4], [5]], "int64")
    t = fluid.create_lod_tensor(ids_v, [[2, 3]], fluid.CPUPlace())
    out = exe.run(main, feed={"ids": t}, fetch_list=[pooled])[0]
    return {"levels": [emb.lod_level, sq.lod_level, conv.lod_level], "pooled": out}


# -- cross_entropy with a hard label without the class dim -----------------------------------

def cross_entropy_rank_minus_one(fluid):
    """Probabilities [-1, -1, V], hard labels [-1, -1] (and [-1, -1, 1] beside): the loss's
    shape at build and run time, its values and the gradient."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, -1, 5], dtype="float32")
        y = fluid.data(name="y", shape=[-1, -1], dtype="int64")
        y3 = fluid.data(name="y3", shape=[-1, -1, 1], dtype="int64")
        x.stop_gradient = False
        p = fluid.layers.softmax(x)
        ce = fluid.layers.cross_entropy(p, y)
        ce3 = fluid.layers.cross_entropy(p, y3)
        grad = fluid.gradients(fluid.layers.mean(ce), x)[0]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.RandomState(0)
    xv = rng.randn(2, 3, 5).astype("float32")
    yv = rng.randint(0, 5, (2, 3)).astype("int64")
    ce_v, ce3_v, grad_v = exe.run(main, feed={"x": xv, "y": yv, "y3": yv[..., None]},
                                  fetch_list=[ce, ce3, grad])
    return {"x": xv, "y": yv, "build_shapes": [list(ce.shape), list(ce3.shape)],
            "ce": ce_v, "ce3": ce3_v, "grad": grad_v}


# -- create_lod_tensor / LoDTensor with a LoD given as numpy ---------------------------------

def numpy_lods(fluid):
    """create_lod_tensor and LoDTensor.set_recursive_sequence_lengths / set_lod given numpy
    LoDs: the lengths and offsets they keep."""
    d = np.arange(5, dtype="float32").reshape(5, 1)
    place = fluid.CPUPlace()
    out = {}
    for name, lens in [("array_2d", np.array([[2, 3]])),
                       ("list_of_arrays", [np.array([2, 3])]),
                       ("int32", np.array([[2, 3]], dtype="int32")),
                       ("two_levels", [np.array([1, 1]), np.array([2, 3])])]:
        t = fluid.create_lod_tensor(d, lens, place)
        out[name] = {"lengths": t.recursive_sequence_lengths(), "lod": t.lod(),
                     "data": np.array(t)}
    t = fluid.LoDTensor()
    t.set(d, place)
    t.set_recursive_sequence_lengths(np.array([[2, 3]]))
    out["set_lengths"] = t.recursive_sequence_lengths()
    t.set_lod(np.array([[0, 1, 5]]))
    out["set_lod"] = t.lod()
    return out


# -- what iterable DataLoader / PyReader yield -----------------------------------------------

def loader_yields(fluid):
    """The first step of iterable loaders (DataLoader.from_generator, PyReader; return_list
    False and True): per fed variable its type name, shape(), lod(),
    recursive_sequence_lengths() and np.array shape."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        w = fluid.data(name="w", shape=[None, 1], dtype="int64", lod_level=1)

    def samples():
        for i in range(4):
            yield np.full([2], i, "float32"), [[i]] * (i + 1)

    out = {}
    for return_list in (False, True):
        for kind in ("DataLoader", "PyReader"):
            if kind == "DataLoader":
                r = fluid.io.DataLoader.from_generator(feed_list=[x, w], capacity=2,
                                                       return_list=return_list)
                r.set_sample_generator(samples, 2, places=fluid.cpu_places(1))
            else:
                r = fluid.io.PyReader(feed_list=[x, w], capacity=2, return_list=return_list)
                r.decorate_sample_generator(samples, 2, places=fluid.cpu_places(1))
            steps = list(r())
            first = steps[0][0]
            items = sorted(first.items()) if isinstance(first, dict) else enumerate(first)
            out[f"{kind}_return_list{int(return_list)}"] = {
                "steps": len(steps), "container": type(first).__name__,
                "fields": [[str(k), type(v).__name__, v.shape(), v.lod(),
                            v.recursive_sequence_lengths(), list(np.array(v).shape)]
                           for k, v in items]}
    return out


# -- parameter-server mode: the trainer program of dist_word2vec's net ------------------------

PSERVER_OPS = ("lookup_table", "distributed_lookup_table", "split_byref", "split_selected_rows",
               "send", "send_barrier", "recv", "fetch_barrier", "concat", "fake_init",
               "fill_constant", "scale", "sgd")


def _word2vec_net(fluid, dict_size):
    words = [fluid.layers.data(name=n, shape=[1], dtype="int64")
             for n in ("firstw", "secondw", "thirdw", "forthw", "nextw")]
    const = fluid.initializer.Constant
    embs = [fluid.layers.embedding(input=w, size=[dict_size, 32], is_sparse=True,
                                   param_attr=fluid.ParamAttr(name="shared_w",
                                                              initializer=const(0.1)))
            for w in words[:4]]
    hidden = fluid.layers.fc(fluid.layers.concat(embs, axis=1), 256, act="sigmoid",
                             param_attr=fluid.ParamAttr(learning_rate=0.5))
    predict = fluid.layers.fc(hidden, dict_size, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, words[4]))
    fluid.optimizer.SGD(0.001).minimize(loss)


def pserver_programs(fluid):
    """dist_word2vec's net (one table shared by four is_sparse lookups; fc_0.w_0 with
    ParamAttr(learning_rate=0.5)) transpiled for 2 pservers and 2 trainers: the
    communication, lookup and update ops of the trainer's main and startup programs and of
    each pserver's optimize blocks, in order."""
    eps = "127.0.0.1:6170,127.0.0.1:6171"

    def transpiled():
        # a fresh transpile per role, as each process makes its own: fluid 1.8.5's
        # get_pserver_program after get_trainer_program reads freed op descs
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            _word2vec_net(fluid, 2074)
        t = fluid.DistributeTranspiler()
        t.transpile(0, program=main, pservers=eps, trainers=2, sync_mode=True,
                    startup_program=startup)
        return t, startup

    t, startup = transpiled()
    trainer = t.get_trainer_program(wait_port=False)

    def ops(block):  # fluid and spmd order the gradients' splits differently: sorted
        def named(n):  # fluid names its dependency markers __control_var@<random>
            return "__control_var" if n.startswith("__control_var") else n

        return sorted([op.type, sorted(named(n) for n in op.output_arg_names)]
                      for op in block.ops
                      if op.type in PSERVER_OPS and op.type not in ("send", "send_barrier"))

    out = {"trainer": ops(trainer.global_block()),
           "trainer_startup": ops(startup.global_block())}
    for ep in eps.split(","):
        prog = transpiled()[0].get_pserver_program(ep)
        every = [op for b in prog.blocks[1:] for op in b.ops]
        # fluid puts the scaled rate in a block of its own, spmd in the parameter's: where
        # the scale runs is compared as "on this pserver"
        out[ep] = {"sgd": sorted(sorted(op.input_arg_names) for op in every
                                 if op.type == "sgd" and "learning_rate_0" in
                                 op.input_arg_names),
                   "sgd_scaled_rate": sorted(op.input("Param")[0] for op in every
                                             if op.type == "sgd" and "learning_rate_0" not in
                                             op.input_arg_names),
                   "rate_scaled_here": any(op.type == "scale" and op.input_arg_names ==
                                           ["learning_rate_0"] for op in every)}
    return out


# -- save_inference_model / load_inference_model ----------------------------------------------

def inference_model(fluid, dirname):
    """An fc + softmax and a reduce_sum saved (fluid 1.8.5 takes Variable targets only) and
    loaded back: the feed and fetch names, the compute ops of the loaded program (fluid's
    feed and fetch ops apart: spmd's executor feeds and fetches by name) and the outputs."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.layers.fc(x, 2, act="softmax",
                            param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.3)))
        z = fluid.layers.reduce_sum(y)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    out = {}
    for kind, targets in (("variables", [y, z]), ("one", [y])):
        path = f"{dirname}/{kind}"
        saved = fluid.io.save_inference_model(path, ["x"], targets, exe, main)
        prog, feeds, fetches = fluid.io.load_inference_model(path, exe)
        ops = [op.type for op in prog.global_block().ops]
        got = exe.run(prog, feed={"x": np.ones((1, 4), "float32")}, fetch_list=fetches)
        out[kind] = {"saved": list(saved), "feeds": list(feeds),
                     "fetches": [v.name for v in fetches],
                     "compute_ops": [t for t in ops if t not in ("feed", "fetch")],
                     "outputs": [np.array(v) for v in got]}
    return out
