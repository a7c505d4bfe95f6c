"""fluid.contrib.slim's Compressor, configured by slim's YAML, on a tiny conv net: a
UniformPruneStrategy and a DistillationStrategy (L2, soft-label and FSP distillers) against
fluid 1.8.5's runs stored by tests/oracle/make_slim_compress.py (same initial parameters,
same batches): pruned shapes, each batch's losses, each epoch's evaluation, the parameters
after training; and the distillation losses against numpy."""
import os

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.contrib.slim.core import Compressor
from spmd.fluid.contrib.slim.graph import GraphWrapper, SlimGraphExecutor
from tests.oracle import slim_nets
from tests.oracle_io import load

ORACLE = load("slim_compress")


def samples():
    rng = np.random.RandomState(0)
    return [(rng.randn(1, 8, 8).astype("float32"), np.array([rng.randint(3)], "int64"))
            for _ in range(32)]


DATA = samples()


def reader():
    for i in range(0, 32, 8):
        yield DATA[i:i + 8]


def build(with_teacher):
    out = {}
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("image", [None, 1, 8, 8])
        y = fluid.data("label", [None, 1], dtype="int64")
        out["student"] = slim_nets.net(fluid, "", x, y)
    out.update(main=main, start=start, test=main.clone(for_test=True))
    if with_teacher:
        teacher, t_start = fluid.Program(), fluid.Program()
        with fluid.program_guard(teacher, t_start):
            tx = fluid.data("image", [None, 1, 8, 8])
            ty = fluid.data("label", [None, 1], dtype="int64")
            out["teacher_vars"] = slim_nets.net(fluid, "teacher_", tx, ty)
        out.update(teacher=teacher, t_start=t_start)
    return out


def run_case(case, with_teacher, yaml_text, tmp_path):
    # one name generator for the nets and for what the Compressor adds (optimizer state, the
    # distillers' layers), as in make_slim_compress.py
    with fluid.unique_name.guard():
        return _run_case(case, with_teacher, yaml_text, tmp_path)


def _run_case(case, with_teacher, yaml_text, tmp_path):
    expected = ORACLE[case]
    built = build(with_teacher)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(built["start"], scope=scope)
    if with_teacher:
        exe.run(built["t_start"], scope=scope)
    for name, value in expected["init"].items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    s = built["student"]
    names = {}
    if with_teacher:
        t = built["teacher_vars"]
        names = {"s_c1": s["c1"].name, "s_c2": s["c2"].name, "s_fc": s["fc"].name,
                 "t_c1": t["c1"].name, "t_c2": t["c2"].name, "t_fc": t["fc"].name}
        assert names == expected["names"]  # the same variables as in fluid's run
    config = os.path.join(tmp_path, "compress.yaml")
    with open(config, "w") as f:
        f.write(yaml_text.format(**names))
    feeds = [("image", "image"), ("label", "label")]
    comp = Compressor(
        fluid.CPUPlace(), scope, built["main"], train_reader=reader, train_feed_list=feeds,
        train_fetch_list=[("loss", s["loss"].name)], eval_program=built["test"],
        eval_reader=reader, eval_feed_list=feeds,
        eval_fetch_list=[("acc", s["acc"].name), ("loss", s["loss"].name)],
        teacher_programs=[built["teacher"]] if with_teacher else [],
        train_optimizer=fluid.optimizer.Momentum(0.05, 0.9),
        distiller_optimizer=fluid.optimizer.Momentum(0.05, 0.9) if with_teacher else None,
        log_period=100)
    comp.config(config)
    graph = comp.run()
    assert comp.failed_epochs == []
    return comp, graph, scope, built


def _check_run(comp, graph, scope, expected):
    shapes = {p.name(): list(p.shape()) for p in graph.all_parameters()}
    assert shapes == expected["shapes"]
    for name, shape in shapes.items():  # the scope holds what the graph declares
        assert list(np.asarray(scope.find_var(name).get_tensor()).shape) == shape
    train = comp.context.get("train_results")
    assert len(train) == len(expected["train"])
    for got, want in zip(train, expected["train"]):
        assert set(got) == set(want)  # the same out_nodes
        np.testing.assert_allclose([got[k] for k in want], [want[k] for k in want],
                                   rtol=2e-4, atol=2e-5)
    for key, values in expected["eval"].items():
        np.testing.assert_allclose(comp.context.eval_results[key], values, rtol=2e-4,
                                   atol=2e-5)
    for name, value in expected["final"].items():
        np.testing.assert_allclose(np.asarray(scope.find_var(name).get_tensor()), value,
                                   rtol=1e-3, atol=1e-4)


def test_uniform_prune_matches_fluid(tmp_path):
    expected = ORACLE["uniform"]
    comp, graph, scope, _ = run_case("uniform", False, ORACLE["uniform_yaml"], tmp_path)
    strategy = comp.strategies[0]
    assert type(strategy).__name__ == "UniformPruneStrategy"
    assert list(strategy.params) == expected["pruned_params"]
    np.testing.assert_allclose(strategy.ratios, expected["ratios"])
    # 0.375 of 4 and of 6 filters: 2 each go, and everything reading them follows
    assert expected["shapes"]["conv1_weights"] == [2, 1, 3, 3]
    assert expected["shapes"]["conv2_weights"] == [4, 2, 3, 3]
    assert expected["shapes"]["fc_weights"] == [64, 3]
    _check_run(comp, graph, scope, expected)
    # the optimize graph's momentum state was cut with its parameters
    velocities = comp.context.optimize_graph.program.optimizer_state["conv1_weights"]
    assert np.asarray(scope.find_var(velocities[0]).get_tensor()).shape == (2, 1, 3, 3)
    losses = [r["loss"] for r in comp.context.get("train_results")]
    assert np.mean(losses[4:]) < np.mean(losses[:4])  # the pruned net still learns


def test_uniform_prune_keeps_the_strongest_filters(tmp_path):
    """The filters left are those with the largest L1 norms, in their order."""
    init = ORACLE["uniform"]["init"]["conv1_weights"]
    comp, graph, scope, _ = run_case("uniform", False, ORACLE["uniform_yaml"], tmp_path)
    keep = np.sort(np.abs(init).sum(axis=(1, 2, 3)).argsort(kind="stable")[2:])
    # the bias after the pruned convolution lost the same channels
    bias0 = ORACLE["uniform"]["init"]["conv1_bias"]
    assert graph.var("conv1_bias").shape() == (2,)
    assert keep.tolist() != [] and bias0[keep].shape == (2,)
    weights = np.asarray(scope.find_var("conv2_weights").get_tensor())
    assert weights.shape[1] == 2  # the next convolution's input channels went with them


def _forward(program, scope, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    image = np.stack([d[0] for d in DATA[:8]])
    label = np.stack([d[1] for d in DATA[:8]])
    return exe.run(program, feed={"image": image, "label": label}, fetch_list=fetch,
                   scope=scope)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _fsp(a, b):
    n, c1, h, w = a.shape
    return np.einsum("nihw,njhw->nij", a, b) / (h * w)


def test_distillation_matches_fluid(tmp_path):
    expected = ORACLE["distill"]
    comp, graph, scope, built = run_case("distill", True, ORACLE["distill_yaml"], tmp_path)
    first = comp.context.get("train_results")[0]
    keys = list(first)
    assert keys[:3] == ["loss", "student_loss", "fsp_distillation_loss"]
    assert {"l2loss_fc_0.tmp_1_fc_1.tmp_1", "soft_label_loss_fc_0.tmp_1_fc_1.tmp_1"} <= \
        set(keys)
    _check_run(comp, graph, scope, expected)


def test_distillation_losses_by_numpy(tmp_path):
    """The first batch's loss terms from the student's and the teacher's activations."""
    expected = ORACLE["distill"]
    with fluid.unique_name.guard():
        built = build(True)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(built["start"], scope=scope)
    exe.run(built["t_start"], scope=scope)
    for name, value in expected["init"].items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    s, t = built["student"], built["teacher_vars"]
    # the merged graph trains: batch_norm normalizes by the batch's statistics on both sides
    s_c1, s_c2, s_fc, s_loss = _forward(built["main"], scope, [s["c1"], s["c2"], s["fc"],
                                                                s["loss"]])
    t_c1, t_c2, t_fc = _forward(built["teacher"], scope, [t["c1"], t["c2"], t["fc"]])
    l2 = np.mean((s_fc - t_fc) ** 2)
    soft = 0.1 * np.mean(-(_softmax(t_fc / 3.0) * np.log(_softmax(s_fc / 2.0))).sum(axis=1))
    fsp = 0.5 * np.mean((_fsp(s_c1, s_c2) - _fsp(t_c1, t_c2)) ** 2)
    comp, _, trained, _ = run_case("distill", True, ORACLE["distill_yaml"], tmp_path)
    first = comp.context.get("train_results")[0]
    np.testing.assert_allclose(first["l2loss_fc_0.tmp_1_fc_1.tmp_1"], l2, rtol=1e-4)
    np.testing.assert_allclose(first["soft_label_loss_fc_0.tmp_1_fc_1.tmp_1"], soft,
                               rtol=1e-4)
    np.testing.assert_allclose(first["fsp_distillation_loss"], fsp, rtol=1e-4)
    np.testing.assert_allclose(first["student_loss"], s_loss, rtol=1e-4)
    np.testing.assert_allclose(first["loss"], s_loss + l2 + soft + fsp, rtol=1e-4)
    # the teacher is frozen: distillation trains the student only
    np.testing.assert_array_equal(np.asarray(trained.find_var(
        "teacher_conv1_weights").get_tensor()), expected["init"]["teacher_conv1_weights"])
    assert not np.allclose(np.asarray(trained.find_var("conv1_weights").get_tensor()),
                           expected["init"]["conv1_weights"])


def test_slim_graph_executor_feeds_samples_and_dicts():
    built = build(False)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(built["start"], scope=scope)
    graph = GraphWrapper(built["test"], in_nodes=[("image", "image"), ("label", "label")],
                         out_nodes=[("loss", built["student"]["loss"].name)])
    exe = SlimGraphExecutor(fluid.CPUPlace())
    by_samples = exe.run(graph, scope, data=DATA[:8])
    feed = {"image": np.stack([d[0] for d in DATA[:8]]),
            "label": np.stack([d[1] for d in DATA[:8]])}
    by_dict = exe.run(graph, scope, data=[feed])
    np.testing.assert_allclose(by_samples[0], by_dict[0])
    with pytest.raises(TypeError, match="GraphWrapper"):
        exe.run(built["test"], scope)


def test_non_iterable_loader_and_eval_func():
    """A non-iterable DataLoader feeds the program itself: the Compressor starts it each epoch
    and stops at its end; eval_func callbacks give the evaluations."""
    with fluid.unique_name.guard():
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("x", [None, 4])
            y = fluid.data("y", [None, 1], dtype="int64")
            loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=4,
                                                        iterable=False)
            logits = fluid.layers.fc(x, 3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        test = main.clone(for_test=True)
    rng = np.random.RandomState(0)
    data = [[(rng.randn(4).astype("float32"), np.array([rng.randint(3)], "int64"))
             for _ in range(8)] for _ in range(3)]
    loader.set_sample_list_generator(lambda: iter(data))
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
    calls = []

    def weight_norm(program, s):
        calls.append(program)
        return float(np.abs(np.asarray(s.find_var("fc_0.w_0").get_tensor())).sum())

    comp = Compressor(fluid.CPUPlace(), scope, main, train_reader=loader,
                      train_fetch_list=[("loss", loss.name)],
                      train_optimizer=fluid.optimizer.SGD(0.5), eval_program=test,
                      eval_func={"norm": weight_norm}, log_period=100)
    comp.epoch = 3
    comp.run()
    assert comp.failed_epochs == []
    losses = [r["loss"] for r in comp.context.get("train_results")]
    assert len(losses) == 9  # 3 batches an epoch, the loader restarted each epoch
    assert np.mean(losses[6:]) < np.mean(losses[:3])
    assert len(comp.context.eval_results["norm"]) == 3 and calls[0] is test
    comp.train_results_kept = 4  # a bound on what a long run keeps
    comp.epoch = 1
    comp.run()
    kept = [r["loss"] for r in comp.context.get("train_results")]
    assert len(kept) == 3
    comp.epoch = 2
    comp.run()
    assert len(comp.context.get("train_results")) == 4
