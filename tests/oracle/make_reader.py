"""Reference outputs of PaddlePaddle 1.8.5's readers: paddle.batch and the paddle.reader
decorators, fluid.DataFeeder.feed, and DataLoader.from_generator with one and two places.

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


cases = {"decorators": decorator_cases(), "feeder": feeder_cases(), "loader": loader_cases()}
save("reader", cases, meta={"paddle": paddle.__version__})
print("wrote reader.json")
