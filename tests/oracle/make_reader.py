"""Reference outputs of PaddlePaddle 1.8.5's readers: paddle.batch and the paddle.reader
decorators, fluid.DataFeeder.feed, DataLoader.from_generator with one and two places, and
drop_last=False over several places (what each step feeds and fetches, how the epoch ends).

Run with the oracle's Python from outside the checkout:
    cd /tmp && /work/oracle185/bin/python /work/main/tests/oracle/make_reader.py
"""
import os
import random
import sys

import numpy as np
import paddle
import paddle.fluid as fluid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402


def samples():
    for i in range(7):
        yield (i, [i, i + 1])


def decorator_cases():
    r = paddle.reader
    ten = lambda: iter(range(10))  # noqa: E731
    random.seed(5)
    shuffled = list(r.shuffle(ten, 4)())
    return {
        "batch": list(paddle.batch(samples, 3)()),
        "batch_drop": list(paddle.batch(samples, 3, drop_last=True)()),
        "batch_drop_none": list(paddle.batch(samples, 3, drop_last=None)()),
        "batch_drop_zero": list(paddle.batch(samples, 3, drop_last=0)()),
        "io_batch": list(fluid.io.batch(ten, 4)()),
        "compose": list(r.compose(ten, samples, check_alignment=False)()),
        "chain": list(r.chain(samples, ten)()),
        "map": list(r.map_readers(lambda a, b: a * b[1], ten, samples)()),
        "firstn": list(r.firstn(ten, 3)()),
        "firstn_negative": list(r.firstn(ten, -1)()),
        "xmap_order": list(r.xmap_readers(lambda x: x * 3, ten, 3, 2, order=True)()),
        "cache": list(r.cache(samples)()),
        "buffered": list(r.buffered(ten, 2)()),
        "shuffle_seed5": shuffled,
    }


def feeder_cases():
    out = {}
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        img = fluid.layers.data(name="img", shape=[1, 2, 2])
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        vec = fluid.data(name="vec", shape=[None, 3], dtype="float64")
        feeder = fluid.DataFeeder(feed_list=[img, label, vec], place=fluid.CPUPlace())
        batch = [(np.arange(4) + i, i, [[i, 2 * i, 3 * i]]) for i in range(3)]
        res = feeder.feed(batch)
        out["feed"] = {k: np.array(v) for k, v in res.items()}
        nested = [([[1, 2], [3, 4]], [5], [1.5, 2.5, 3.5])]
        res = feeder.feed(nested)
        out["feed_nested"] = {k: np.array(v) for k, v in res.items()}
        parts = list(feeder.feed_parallel([batch[:1], batch[1:]], 2))
        out["feed_parallel"] = [{k: np.array(v) for k, v in p.items()} for p in parts]
        out["attributes"] = {"feed_names": feeder.feed_names,
                             "feed_shapes": [list(s) for s in feeder.feed_shapes],
                             "feed_shape_types": [type(s).__name__ for s in feeder.feed_shapes],
                             "feed_lod_level": feeder.feed_lod_level}
    return out


def loader_cases():
    out = {}
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        for places, drop in (([fluid.CPUPlace()], True), ([fluid.CPUPlace()] * 2, True),
                             ([fluid.CPUPlace()] * 2, False)):
            loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=2,
                                                        drop_last=drop)
            loader.set_sample_generator(lambda: iter([([i, i + 1], [i]) for i in range(9)]),
                                        batch_size=2, drop_last=False, places=places)
            steps = []
            for data in loader():
                steps.append([{k: np.array(v) for k, v in d.items()} for d in data])
            out[f"places{len(places)}_drop{int(drop)}"] = steps
    return out


def py_reader_name_cases():
    """The name of the reader fluid.layers.py_reader / create_py_reader_by_data return."""
    out = {}
    # a scope of its own: a reader's queue lives in the global scope, under a name that the
    # other cases (each in a unique_name.guard) would make again
    with fluid.program_guard(fluid.Program(), fluid.Program()), \
            fluid.scope_guard(fluid.Scope()):
        for double in (True, False):
            for name in (None, f"train_{int(double)}"):
                reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 1)], dtypes=["float32"],
                                                name=name, use_double_buffer=double)
                kind = "named" if name else "unnamed"
                out[f"py_reader_{kind}_double{int(double)}"] = reader.name
        a = fluid.data(name="a", shape=[None, 1], dtype="float32")
        out["by_data_named"] = fluid.layers.create_py_reader_by_data(
            capacity=2, feed_list=[a], name="cr").name
        out["by_data_unnamed"] = fluid.layers.create_py_reader_by_data(
            capacity=2, feed_list=[a]).name
    return out


def _summary(error):
    """The first line of a fluid error's summary (the part after the C++ stack)."""
    text = str(error)
    at = text.find("Error Message Summary")
    if at < 0:
        return type(error).__name__ + ": " + text.strip().splitlines()[0]
    return text[at:].strip().splitlines()[2]


def _partial_program(loader_kw):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=2, **loader_kw)
        pred = fluid.layers.fc(x, 3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, test, startup, loss, pred, loader


def _thirteen():
    return iter([([i, i], [i % 3]) for i in range(13)])


def _five_batches():
    for i in range(5):
        yield [np.full((3, 2), i, "float32"), np.full((3, 1), i % 3, "int64")]


def _set_source(loader, source, places):
    if source == "batch":
        loader.set_batch_generator(_five_batches, places=places)
    elif source == "sample_list":
        loader.set_sample_list_generator(paddle.batch(_thirteen, 3), places=places)
    else:
        loader.set_sample_generator(_thirteen, 3, drop_last=False, places=places)


def _partial_run(source, program, iterable, nplaces, merged=True):
    """drop_last=False with `nplaces` CPU places: per step, the x rows each place was fed
    (iterable: what the loader yielded) and the fetched shapes; then how the epoch ended."""
    main, test, startup, loss, pred, loader = _partial_program(
        {"iterable": iterable, "drop_last": False})
    places = fluid.cpu_places(nplaces)
    _set_source(loader, source, places)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope() if iterable else fluid.global_scope()  # its queue lives there
    steps, end = [], None
    with fluid.scope_guard(scope):
        exe.run(startup)
        target = main if program == "train" else test
        compiled = fluid.CompiledProgram(target).with_data_parallel(
            loss_name=loss.name, places=places)

        def run(feed=None):
            got = exe.run(compiled, feed=feed, fetch_list=[loss.name, pred.name],
                          return_merged=merged)
            if merged:
                return [list(np.shape(a)) for a in got]
            return [[list(np.shape(p)) for p in a] for a in got]

        try:
            if iterable:
                for data in loader():
                    rows = [np.array(d["x"])[:, 0].tolist() for d in data]
                    steps.append({"rows": rows, "fetch_shapes": run(data)})
            else:
                loader.start()
                while True:
                    steps.append({"fetch_shapes": run()})
        except fluid.core.EOFException:
            end = "EOF"
            loader.reset()
        except Exception as e:  # noqa: BLE001 - what fluid raised is the oracle
            end = _summary(e)
    return {"steps": steps, "end": end or "exhausted"}


def partial_cases():
    out = {}
    for source in ("batch", "sample_list", "sample"):
        for program in ("train", "test"):
            for iterable in (True, False):
                for nplaces in (2, 3):
                    mode = "iterable" if iterable else "start"
                    key = f"{source}_{program}_{mode}_places{nplaces}"
                    out[key] = _partial_run(source, program, iterable, nplaces)
    out["batch_test_iterable_places2_unmerged"] = _partial_run("batch", "test", True, 2, False)
    out["batch_test_start_places2_unmerged"] = _partial_run("batch", "test", False, 2, False)
    return out


def direct_feed_cases():
    """exe.run(compiled, feed=...) with fewer per-place feeds (or samples) than places."""
    out = {}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        pred = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(pred)
        test = main.clone(for_test=True)
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        two = fluid.cpu_places(2)
        train = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=two)
        infer = fluid.CompiledProgram(test).with_data_parallel(share_vars_from=train,
                                                               places=two)
        d = {"x": np.ones((2, 2), "float32")}
        one_row = {"x": np.ones((1, 2), "float32")}
        for name, prog, feed in (("train_list1", train, [d]), ("train_list3", train, [d] * 3),
                                 ("train_dict1row", train, one_row),
                                 ("train_list2", train, [d, d]),
                                 ("test_list1", infer, [d]), ("test_list3", infer, [d] * 3),
                                 ("test_dict1row", infer, one_row)):
            try:
                got = exe.run(prog, feed=feed, fetch_list=[pred.name])
                out[name] = {"pred_shape": list(got[0].shape)}
            except Exception as e:  # noqa: BLE001 - what fluid raised is the oracle
                out[name] = {"error": _summary(e)}
    return out


def collate_cases():
    """fluid.io.default_collate_fn on the sample forms a batch generator sees."""
    f = fluid.io.default_collate_fn
    batches = {
        "tuples_of_arrays": [(np.array([1.0, 2.0]), np.array([3])),
                             (np.array([4.0, 5.0]), np.array([6]))],
        "ndarrays": [np.array([1, 2]), np.array([3, 4])],
        "tuples_of_numbers": [(1, 2.5), (3, 4.5)],
        "lists": [[1, 2], [3, 4]],
        "zero_d_arrays": [np.array(1), np.array(2)],
        "float32_images": [(np.ones((2, 2), "float32"), 1), (np.zeros((2, 2), "float32"), 0)],
        "ndarray_then_tuple": [np.array([1, 2]), (3, 4)],
    }
    out = {}
    for name, batch in batches.items():
        out[name] = f(batch)
    for name, batch in (("ragged", [(np.array([1.0, 2.0]),), (np.array([4.0]),)]),
                        ("ints", [1, 2]), ("empty", [])):
        try:
            f(batch)
            out[name] = "no error"
        except Exception as e:  # noqa: BLE001 - what fluid raised is the oracle
            out[name] = type(e).__name__
    return out


names = py_reader_name_cases()  # first: unnamed readers are counted from 0
cases = {"decorators": decorator_cases(), "feeder": feeder_cases(), "loader": loader_cases(),
         "partial": partial_cases(), "direct_feed": direct_feed_cases(),
         "collate": collate_cases(), "py_reader_names": names}
save("reader", cases, meta={"paddle": paddle.__version__})
print("wrote reader.json")
