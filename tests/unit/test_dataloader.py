"""fluid.io.DataLoader.from_generator: iterable and non-iterable modes, several places,
errors from the generator, against Paddle 1.8.5's batches."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from tests.oracle_io import load

ORACLE = load("reader")["loader"]


def build(iterable=True, drop_last=True, return_list=False, capacity=2):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 2], dtype="float32")
        y = fluid.data(name="y", shape=[None, 1], dtype="int64")
        loader = fluid.io.DataLoader.from_generator(
            feed_list=[x, y], capacity=capacity, iterable=iterable, return_list=return_list,
            drop_last=drop_last)
        pred = fluid.layers.fc(x, 3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, startup, loss, loader


def samples():
    return iter([([i, i + 1], [i]) for i in range(9)])


@pytest.mark.parametrize("places,drop", [(1, True), (2, True), (2, False)])
def test_iterable_batches_match_fluid(places, drop):
    *_, loader = build(drop_last=drop)
    loader.set_sample_generator(samples, batch_size=2, drop_last=False,
                                places=[fluid.CPUPlace()] * places)
    want = ORACLE[f"places{places}_drop{int(drop)}"]
    got = list(loader())
    assert len(got) == len(want)
    for step_got, step_want in zip(got, want):
        assert len(step_got) == len(step_want)
        for g, w in zip(step_got, step_want):
            for name in ("x", "y"):
                assert isinstance(g[name], fluid.LoDTensor)  # as fluid's loader yields
                assert np.array(g[name]).dtype == w[name].dtype
                np.testing.assert_array_equal(np.array(g[name]), w[name])


def test_return_list_gives_tensors_per_place():
    *_, loader = build(return_list=True)
    loader.set_batch_generator(
        lambda: iter([(np.ones((2, 2), "float32"), np.zeros((2, 1), "int64"))] * 3),
        places=fluid.CPUPlace())
    steps = list(loader())
    assert len(steps) == 3 and len(steps[0]) == 1 and steps[0][0][0].shape() == [2, 2]


def train_params(main, scope):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.all_parameters()}


def plain_training(batches):
    main, startup, loss, _ = build()
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for x, y in batches:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    return train_params(main, scope)


BATCHES = [(np.random.default_rng(i).standard_normal((4, 2)).astype("float32"),
            np.arange(4).reshape(4, 1) % 3) for i in range(6)]


def test_iterable_training_equals_plain_feed():
    main, startup, loss, loader = build()
    loader.set_batch_generator(lambda: iter(BATCHES), places=fluid.cpu_places(1))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for data in loader():
        exe.run(main, feed=data, fetch_list=[loss], scope=scope)
    want = plain_training(BATCHES)
    for name, value in train_params(main, scope).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-6)


def test_non_iterable_epochs_until_eof():
    main, startup, loss, loader = build(iterable=False)
    loader.set_batch_generator(lambda: iter(BATCHES[:3]))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    steps = []
    for _ in range(2):
        loader.start()
        n = 0
        try:
            while True:
                exe.run(main, fetch_list=[loss], scope=scope)
                n += 1
        except fluid.core.EOFException:
            loader.reset()
        steps.append(n)
    assert steps == [3, 3]
    want = plain_training(BATCHES[:3] * 2)
    for name, value in train_params(main, scope).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-6)


def test_the_queue_shows_the_batches_read_ahead():
    """fluid's loader.queue (BERT's train.py prints queue.size() every step): capacity() is
    the loader's, size() the batches read and not yet run, never the end of the data."""
    import time

    main, startup, loss, loader = build(iterable=False, capacity=5)
    loader.set_batch_generator(lambda: iter(BATCHES[:3]))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    assert loader.queue.capacity() == 5 and loader.queue.size() == 0
    loader.start()
    exe.run(main, fetch_list=[loss], scope=scope)
    deadline = time.monotonic() + 60  # a bound on the reading thread, not a timing
    while loader.queue.size() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loader.queue.size() == 2 and not loader.queue.is_closed()
    exe.run(main, fetch_list=[loss], scope=scope)
    assert loader.queue.size() == 1
    exe.run(main, fetch_list=[loss], scope=scope)
    assert loader.queue.size() == 0
    with pytest.raises(fluid.core.EOFException):
        exe.run(main, fetch_list=[loss], scope=scope)
    loader.reset()


def test_non_iterable_data_parallel_gives_each_place_a_batch():
    main, startup, loss, loader = build(iterable=False)
    loader.set_batch_generator(lambda: iter(BATCHES[:4]))
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    compiled = fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 2)
    loader.start()
    with pytest.raises(fluid.core.EOFException):
        while True:
            exe.run(compiled, fetch_list=[loss], scope=scope)
    loader.reset()
    # two places, each with a batch of 4: one process fed both batches as one batch of 8
    joined = [(np.concatenate([BATCHES[i][0], BATCHES[i + 1][0]]),
               np.concatenate([BATCHES[i][1], BATCHES[i + 1][1]])) for i in (0, 2)]
    want = plain_training(joined)
    for name, value in train_params(main, scope).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-5)


def test_generator_error_reaches_the_run_with_its_traceback():
    main, startup, loss, loader = build(iterable=False)

    def broken():
        yield BATCHES[0]
        raise OSError("disk went away")

    loader.set_batch_generator(broken)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    loader.start()
    exe.run(main, fetch_list=[loss], scope=scope)
    with pytest.raises(OSError, match="disk went away") as info:
        exe.run(main, fetch_list=[loss], scope=scope)
    assert any(entry.name == "broken" for entry in info.traceback)
    loader.reset()


def test_iterable_generator_error_is_raised_by_iteration():
    *_, loader = build()

    def broken():
        raise KeyError("bad file")
        yield

    loader.set_batch_generator(broken, places=fluid.CPUPlace())
    with pytest.raises(KeyError, match="bad file"):
        list(loader())


def test_misuse_is_explained():
    main, startup, loss, loader = build(iterable=False)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(RuntimeError, match="no data source"):
        loader.start()
    loader.set_batch_generator(lambda: iter(BATCHES))
    with pytest.raises(RuntimeError, match="not started"):
        exe.run(main, fetch_list=[loss], scope=scope)
    loader.start()
    with pytest.raises(RuntimeError, match="start\\(\\) called twice"):
        loader.start()
    loader.reset()
    with pytest.raises(RuntimeError, match="not iterable"):
        iter(loader)
    *_, iterable = build()
    with pytest.raises(ValueError, match="places must be given"):
        iterable.set_batch_generator(lambda: iter(BATCHES))
    with pytest.raises(ValueError, match="capacity"):
        fluid.io.DataLoader.from_generator(feed_list=[main.global_block().var("x")])


def test_bad_batch_names_the_variable():
    *_, loader = build()
    loader.set_sample_list_generator(
        lambda: iter([[([1, 2], [0]), ([1, 2, 3], [1])]]), places=fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"'x': sample 1 has shape \[3\]"):
        list(loader())
