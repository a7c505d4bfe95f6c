"""A bad feed is a FeedError naming the variable and the sizes, raised by the feed check before
any op runs (never a numpy error from inside a kernel), and it leaves the program usable: the
parameters are unchanged and training goes on to the parameters of a run without the bad batch.
For a plain Executor run and for a data-parallel CompiledProgram over two places of this
process (whose feed is split across them)."""
from __future__ import annotations

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import FeedError

STEPS = 3


def _build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 4], "float64")
        y = fluid.data("y", [-1, 1], "float64")
        h = fluid.layers.fc(x, 8, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _batches():
    rng = np.random.default_rng(7)
    return [{"x": rng.standard_normal((4, 4)), "y": rng.standard_normal((4, 1))}
            for _ in range(STEPS)]


def _params(scope, main) -> dict:
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in main.all_parameters()}


def _runner(compiled: bool):
    """(run(feed), params()) over a fresh program and scope."""
    main, startup, loss = _build()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    program = (fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=[fluid.CPUPlace()] * 2) if compiled else main)

    def run(feed):
        return exe.run(program, feed=feed, fetch_list=[loss], scope=scope)

    return run, lambda: _params(scope, main)


def _assert_same(got: dict, want: dict):
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-14, err_msg=name)


# (name, bad feed from a good one, patterns the error holds)
BAD = [
    ("dtype", lambda f: {**f, "x": f["x"].astype("float32")},
     [r"feed 'x': expected dtype float64, got float32", r"\.astype\('float64'\)"]),
    ("shape", lambda f: {**f, "x": f["x"][:, :3]},
     [r"feed 'x': expected shape \[None, 4\]", r"got \[[24], 3\]"]),
    ("rank", lambda f: {**f, "y": f["y"][:, 0]},
     [r"feed 'y': expected shape \[None, 1\]", r"got \[[24]\]"]),
    ("missing", lambda f: {"x": f["x"]}, [r"\['y'\] must be fed", r"fed: \['x'\]"]),
    ("empty", lambda f: {k: v[:0] for k, v in f.items()},
     [r"feed '[xy]': the batch is empty \(0 rows, shape \[0, [14]\]\)", r"drop_last=True"]),
    ("ragged", lambda f: {**f, "x": [[1.0, 2.0, 3.0, 4.0], [1.0]]},
     [r"feed 'x': cannot convert to (float64|an array)"]),
]


@pytest.mark.parametrize("compiled", [False, True], ids=["Executor", "CompiledProgram"])
@pytest.mark.parametrize("make_bad,patterns", [(b, p) for _, b, p in BAD],
                         ids=[name for name, _, _ in BAD])
def test_a_bad_feed_is_named_and_training_goes_on(compiled, make_bad, patterns):
    reference, reference_params = _runner(compiled)
    for feed in _batches():
        reference(feed)
    run, params = _runner(compiled)
    for step, feed in enumerate(_batches()):
        if step == 1:
            before = params()
            with pytest.raises(FeedError) as caught:
                run(make_bad(feed))
            for pattern in patterns:
                assert caught.match(pattern)
            assert not any("spmd/kernels" in str(entry.path) for entry in caught.traceback)
            _assert_same(params(), before)
        run(feed)
    _assert_same(params(), reference_params())


def test_a_split_that_leaves_a_place_without_rows_names_the_variable_and_both_sizes():
    run, params = _runner(compiled=True)
    feed = _batches()[0]
    before = params()
    with pytest.raises(FeedError, match=r"feed '[xy]' has a batch of 1 but there are 2 places"):
        run({k: v[:1] for k, v in feed.items()})
    # a list feed, one dict per place, with one place's batch empty
    with pytest.raises(FeedError, match=r"feed '[xy]': the batch is empty \(0 rows"):
        run([{k: v[:2] for k, v in feed.items()}, {k: v[:0] for k, v in feed.items()}])
    _assert_same(params(), before)
    run(feed)
    assert any(not np.array_equal(params()[n], before[n]) for n in before)


@pytest.mark.parametrize("compiled", [False, True], ids=["Executor", "CompiledProgram"])
def test_a_feed_the_program_does_not_declare_is_ignored_and_training_is_the_same(compiled):
    # fluid 1.8 adds no feed op for a name the program lacks and warns; the run is unchanged
    reference, reference_params = _runner(compiled)
    run, params = _runner(compiled)
    for feed in _batches():
        (want,) = reference(feed)
        with pytest.warns(UserWarning, match="The variable z is not found in program"):
            (got,) = run({**feed, "z": feed["x"]})
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    _assert_same(params(), reference_params())
