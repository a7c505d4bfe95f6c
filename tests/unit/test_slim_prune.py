"""slim's GraphWrapper measures and the prune strategies beyond the uniform one: the FLOPs and
parameter counts and an op's neighbours as fluid 1.8.5 has them
(tests/oracle/make_slim_graph.py); SensitivePruneStrategy's sensitivities equal fluid's and its
ratios prune the FLOPs asked; AutoPruneStrategy searches ratios within its FLOPs range with an
SAController and gives the parameters back; a Compressor resumed from its checkpoint (JSON and
.npy, no pickle) continues as the run that was not interrupted."""
import json
import os

import numpy as np

import spmd.fluid as fluid
from spmd.fluid.contrib.slim.core import Compressor, Context
from spmd.fluid.contrib.slim.graph import GraphWrapper, SlimGraphExecutor
from spmd.fluid.contrib.slim.prune import (
    AutoPruneStrategy,
    StructurePruner,
    UniformPruneStrategy,
)
from spmd.fluid.contrib.slim.searcher import SAController
from tests.oracle_io import load
from tests.unit.test_slim_compressor import DATA, ORACLE, build, reader

GRAPH = load("slim_graph")
INIT = ORACLE["uniform"]["init"]
FEEDS = [("image", "image"), ("label", "label")]


def setup(init=INIT):
    with fluid.unique_name.guard():
        built = build(False)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(built["start"], scope=scope)
    for name, value in init.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    return built, scope


def compressor(built, scope, **kwargs):
    s = built["student"]
    return Compressor(
        fluid.CPUPlace(), scope, built["main"], train_reader=reader, train_feed_list=FEEDS,
        train_fetch_list=[("loss", s["loss"].name)], eval_program=built["test"],
        eval_reader=reader, eval_feed_list=FEEDS,
        eval_fetch_list=[("acc", s["acc"].name), ("loss", s["loss"].name)],
        train_optimizer=fluid.optimizer.Momentum(0.05, 0.9), log_period=100, **kwargs)


def test_graph_measures_match_fluid():
    want = GRAPH["measures"]
    built, _ = setup()
    graph = GraphWrapper(built["test"])
    assert graph.flops() == want["flops"]
    assert graph.flops(only_conv=True) == want["conv_flops"]
    assert graph.numel_params() == want["numel"]
    assert sorted(p.name() for p in graph.all_parameters()) == want["params"]
    conv2 = [op for op in graph.ops() if op.type() == "conv2d"][1]
    assert sorted(op.type() for op in graph.pre_ops(conv2)) == want["conv2_pre"]
    assert sorted(op.type() for op in graph.next_ops(conv2)) == want["conv2_next"]
    # fluid's names: inputs() are the readers of a variable, outputs() its writers
    c1 = graph.var(built["student"]["c1"].name)
    assert [op.type() for op in c1.inputs()] == ["conv2d"]
    assert [op.type() for op in c1.outputs()] == ["relu"]


def test_sensitive_prune_measures_as_fluid_and_prunes_the_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the config's sensitivities_file is relative
    built, scope = setup()
    comp = compressor(built, scope)
    config = tmp_path / "compress.yaml"
    # conv1's filters cost the metric nothing (its losses are all 0), so its ratio is the
    # largest measured (0.75) at any loss level; conv2's fitted cubic (losses -1/32, 0, 1/32
    # at 0.25, 0.5, 0.75) reaches a loss level > 0 past 0.5 only: 0.82 is what is reachable
    config.write_text(GRAPH["sensitive_yaml"].replace("target_ratio: 0.4",
                                                      "target_ratio: 0.82"))
    comp.config(str(config))
    flops = GraphWrapper(built["test"]).flops()
    graph = comp.run()
    assert comp.failed_epochs == []
    with open("slim_sensitivities.data") as f:  # JSON (fluid pickles it)
        table = json.load(f)
    want = GRAPH["sensitive"]["sensitivities"]
    assert set(table) == set(want)
    for name, entry in want.items():
        assert table[name]["pruned_percent"] == entry["pruned_percent"]
        np.testing.assert_allclose(table[name]["loss"], entry["loss"], atol=1e-6)
    pruned = 1 - graph.flops() / flops
    assert abs(pruned - 0.82) < 0.015
    assert graph.var("conv1_weights").shape()[0] == 1  # 3 of 4 filters cut
    assert graph.var("conv2_weights").shape()[0] == 3  # 3 of 6
    for p in graph.all_parameters():  # the scope holds the declared shapes
        assert tuple(np.asarray(scope.find_var(p.name()).get_tensor()).shape) == p.shape()
    assert graph.var("conv2_weights").shape()[1] == graph.var("conv1_weights").shape()[0]


def test_auto_prune_searches_within_its_flops_range(tmp_path):
    np.random.seed(3)
    built, scope = setup()
    comp = compressor(built, scope)
    controller = SAController(reduce_rate=0.9, init_temperature=10, max_iter_number=300)
    # tokens are ratios / 0.01, each in range(90) (without uniform_range, in range(initial
    # token): the search could only prune less)
    strategy = AutoPruneStrategy(StructurePruner({"*": 0}, {"*": "l1_norm"}), controller,
                                 start_epoch=0, end_epoch=2, min_ratio=0.3, max_ratio=0.7,
                                 metric_name="acc", pruned_params="conv.*_weights",
                                 uniform_range=0.9)
    comp._add_strategy(strategy)
    flops = GraphWrapper(built["test"]).flops()
    tried = []

    class Watch(fluid.contrib.slim.core.Strategy):
        def on_epoch_begin(self, context):  # after the search strategy pruned
            tried.append((list(strategy.current_tokens),
                          1 - context.eval_graph.flops() / flops))

    comp._add_strategy(Watch(0, 3))
    comp.run()
    assert comp.failed_epochs == []
    assert len(tried) == 3 and controller.iteration == 2
    for tokens, pruned in tried:
        assert len(tokens) == 2 and 0.3 - 0.02 <= pruned <= 0.7 + 0.02
    assert len(comp.context.eval_results["acc"]) == 3
    # the search prunes and gives back: the shapes and values are the original ones again
    for name in ("conv1_weights", "conv2_weights", "fc_weights"):
        np.testing.assert_array_equal(np.asarray(scope.find_var(name).get_tensor()),
                                      INIT[name])
        assert comp.context.optimize_graph.var(name).shape() == INIT[name].shape


def test_checkpoint_resume_continues_the_run(tmp_path):
    text = ORACLE["uniform_yaml"]
    first = tmp_path / "first.yaml"
    first.write_text(text.replace("epoch: 2", "epoch: 1").replace(
        "compressor:\n", f"compressor:\n    checkpoint_path: '{tmp_path / 'ckpt'}'\n"))
    built, scope = setup()
    comp = compressor(built, scope)
    comp.config(str(first))
    with fluid.unique_name.guard():  # a process of its own: its optimizer state's names
        comp.run()
    saved = tmp_path / "ckpt" / "0"
    with open(saved / "context") as f:
        assert json.load(f)["epoch_id"] == 0
    with open(saved / "strategies") as f:
        state = json.load(f)[0]
    assert state["ratios"] == ORACLE["uniform"]["ratios"]
    for path in saved.rglob("*"):  # nothing a loader would unpickle
        if path.is_file():
            with open(path, "rb") as f:
                assert not f.read(2).startswith(b"\x80")
    # a new process: the whole config, resumed at epoch 1
    second = tmp_path / "second.yaml"
    second.write_text(text.replace(
        "compressor:\n", f"compressor:\n    checkpoint_path: '{tmp_path / 'ckpt'}'\n"))
    built, scope = setup()
    comp = compressor(built, scope)
    comp.config(str(second))
    with fluid.unique_name.guard():
        graph = comp.run()
    assert comp.failed_epochs == []
    want = ORACLE["uniform"]
    assert {p.name(): list(p.shape()) for p in graph.all_parameters()} == want["shapes"]
    losses = [r["loss"] for r in comp.context.get("train_results")]
    np.testing.assert_allclose(losses, [r["loss"] for r in want["train"][4:]], rtol=2e-4)
    np.testing.assert_allclose(comp.context.eval_results["acc"], want["eval"]["acc"])


def test_context_eval_converged_and_sampled_eval(tmp_path):
    built, scope = setup()
    graph = GraphWrapper(built["test"], in_nodes=FEEDS,
                         out_nodes=[("acc", built["student"]["acc"].name)])
    context = Context(fluid.CPUPlace(), scope, eval_graph=graph, eval_reader=reader)
    context.cache_path = str(tmp_path / "cache")
    full, names = context.run_eval_graph()
    assert list(names) == ["acc"]
    sampled, _ = context.run_eval_graph(sampled_rate=0.5, cached_id=1)
    again, _ = context.run_eval_graph(sampled_rate=0.5, cached_id=1)
    assert sampled == again  # the same cached batches
    assert (tmp_path / "cache" / "1" / "list").exists()
    context.eval_results = {"acc": [0.5, 0.5004]}
    assert context.eval_converged("acc", 0.001)
    assert not context.eval_converged("acc", 0.0001)
    assert not context.eval_converged("loss")
    exe = fluid.Executor(fluid.CPUPlace())
    image = np.stack([d[0] for d in DATA])
    label = np.stack([d[1] for d in DATA])
    acc, = exe.run(built["test"], feed={"image": image[:8], "label": label[:8]},
                   fetch_list=[built["student"]["acc"]], scope=scope)
    assert 0.0 <= float(np.mean(full)) <= 1.0 and os.path.isdir(context.cache_path)
    assert float(np.asarray(acc).reshape(-1)[0]) >= 0.0


def _conv_net_without_bn():
    with fluid.unique_name.guard():
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("image", [None, 1, 8, 8])
            y = fluid.data("label", [None, 1], dtype="int64")
            c1 = fluid.layers.conv2d(x, 4, 3, padding=1, act="relu",
                                     param_attr=fluid.ParamAttr(name="conv1_weights"))
            c2 = fluid.layers.conv2d(c1, 6, 3, padding=1, act="relu",
                                     param_attr=fluid.ParamAttr(name="conv2_weights"))
            pool = fluid.layers.pool2d(c2, 2, pool_stride=2)
            logits = fluid.layers.fc(pool, 3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        test = main.clone(for_test=True)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
    rng = np.random.RandomState(4)
    for v in sorted(main.all_parameters(), key=lambda v: v.name):
        scope.find_var(v.name).get_tensor().set(
            rng.uniform(-0.5, 0.5, v.shape).astype("float32"), fluid.CPUPlace())
    return main, test, scope, loss, logits


def _prune_after_an_epoch(monkeypatch, places):
    monkeypatch.setenv("CPU_NUM", str(places))
    main, test, scope, loss, logits = _conv_net_without_bn()
    comp = Compressor(fluid.CPUPlace(), scope, main, train_reader=reader, train_feed_list=FEEDS,
                      train_fetch_list=[("loss", loss.name)], eval_program=test,
                      eval_reader=reader, eval_feed_list=FEEDS,
                      eval_fetch_list=[("loss", loss.name), ("logits", logits.name)],
                      train_optimizer=fluid.optimizer.Momentum(0.05, 0.9), log_period=100)
    comp._add_strategy(UniformPruneStrategy(
        StructurePruner({"*": 0}, {"*": "l1_norm"}), start_epoch=1, end_epoch=3,
        target_ratio=0.5, metric_name="loss"))
    graph = comp.run()
    assert comp.failed_epochs == []
    return comp, graph, scope


def test_two_places_train_the_pruned_net_as_one(monkeypatch):
    """Pruned after an epoch of training: the places' copies of the parameters are the
    pruned ones (the data-parallel program is rebuilt), so 2 places on half batches each
    equal 1 place on the whole batch."""
    one, graph, _ = _prune_after_an_epoch(monkeypatch, 1)
    two, _, _ = _prune_after_an_epoch(monkeypatch, 2)
    assert graph.var("conv1_weights").shape()[0] < 4
    np.testing.assert_allclose([r["loss"] for r in two.context.get("train_results")],
                               [r["loss"] for r in one.context.get("train_results")],
                               rtol=1e-5, atol=1e-6)


def test_pruned_eval_graph_saves_an_inference_model(monkeypatch, tmp_path):
    comp, graph, scope = _prune_after_an_epoch(monkeypatch, 1)
    exe = SlimGraphExecutor(fluid.CPUPlace())
    logits_name = graph.out_nodes["logits"]
    with fluid.scope_guard(scope):
        graph.save_infer_model(str(tmp_path / "infer"), exe, (["image"], [logits_name]))
    batch = next(reader())
    image = np.stack([d[0] for d in batch])
    want = exe.run(graph.clone(for_test=True), scope, data=batch)[1]
    program, feeds, fetches = fluid.io.load_inference_model(
        str(tmp_path / "infer"), fluid.Executor(fluid.CPUPlace()),
        model_filename="__model__.infer", params_filename="__params__")
    got, = fluid.Executor(fluid.CPUPlace()).run(program, feed={feeds[0]: image},
                                                fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # and the inference program declares the pruned shapes
    assert program.global_block().var("conv1_weights").shape == \
        graph.var("conv1_weights").shape()


def test_pruning_follows_depthwise_and_concat():
    """Cutting conv1's filters cuts a depthwise convolution reading them (its filters and
    bias), then, through a concat at offset 0, the input channels of the convolution after."""
    with fluid.unique_name.guard():
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("image", [None, 1, 8, 8])
            c1 = fluid.layers.conv2d(x, 4, 3, padding=1,
                                     param_attr=fluid.ParamAttr(name="conv1_weights"))
            dw = fluid.layers.conv2d(c1, 4, 3, padding=1, groups=4, use_cudnn=False,
                                     param_attr=fluid.ParamAttr(name="dw_weights"))
            side = fluid.layers.conv2d(x, 2, 1, param_attr=fluid.ParamAttr(name="side_weights"))
            cat = fluid.layers.concat([dw, side], axis=1)
            out = fluid.layers.conv2d(cat, 5, 1, param_attr=fluid.ParamAttr(name="out_weights"))
            fluid.layers.mean(out)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
    ops = [op.type for op in main.global_block().ops]
    assert "depthwise_conv2d" in ops and "concat" in ops
    w = np.ones((4, 1, 3, 3), "float32") * np.array([3, 1, 4, 2], "float32")[:, None, None,
                                                                               None]
    scope.find_var("conv1_weights").get_tensor().set(w, fluid.CPUPlace())
    before = {n: np.asarray(scope.find_var(n).get_tensor()).copy()
              for n in ("dw_weights", "out_weights")}
    graph = GraphWrapper(main)
    context = Context(fluid.CPUPlace(), scope, eval_graph=graph.clone(), train_graph=graph)
    context.optimize_graph = graph
    strategy = UniformPruneStrategy(StructurePruner({"*": 0}, {"*": "l1_norm"}),
                                    target_ratio=0.5, pruned_params="conv1_weights")
    strategy.on_epoch_begin(context)
    cut = int(round(4 * strategy.ratios[0]))
    kept = sorted(np.argsort([3, 1, 4, 2], kind="stable")[cut:].tolist())  # the strongest
    assert 0 < cut < 4
    shapes = {p.name(): p.shape() for p in graph.all_parameters()}
    assert shapes["conv1_weights"] == (4 - cut, 1, 3, 3)
    assert shapes["dw_weights"] == (4 - cut, 1, 3, 3)
    assert shapes["out_weights"] == (5, 4 - cut + 2, 1, 1)  # dw's channels left + side's 2
    assert shapes["side_weights"] == (2, 1, 1, 1)
    dw_bias = dw.op.input("Y")[0]  # the bias added to the depthwise output
    assert shapes[dw_bias] == (4 - cut,)
    np.testing.assert_array_equal(np.asarray(scope.find_var("dw_weights").get_tensor()),
                                  before["dw_weights"][kept])
    np.testing.assert_array_equal(np.asarray(scope.find_var("out_weights").get_tensor()),
                                  before["out_weights"][:, kept + [4, 5]])
    assert {p.name(): p.shape() for p in context.eval_graph.all_parameters()} == shapes
    graph.infer_shape()  # the outputs' declared shapes follow
    assert graph.var(out.name).shape()[1] == 5 and graph.var(dw.name).shape()[1] == 4 - cut
    loss, = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"image": np.ones((2, 1, 8, 8), "float32")},
        fetch_list=[main.global_block().ops[-1].output("Out")[0]], scope=scope)
    assert np.isfinite(loss).all()


def test_concat_offsets_count_the_channels_cut_before():
    """Both inputs of a concat pruned in one go: the second input's channels sit after what
    is left of the first (fluid 1.8 offsets them by the first's declared channels)."""
    with fluid.unique_name.guard():
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("image", [None, 1, 8, 8])
            a = fluid.layers.conv2d(x, 4, 3, padding=1, param_attr=fluid.ParamAttr(name="a_w"),
                                    bias_attr=False)
            b = fluid.layers.conv2d(x, 4, 3, padding=1, param_attr=fluid.ParamAttr(name="b_w"),
                                    bias_attr=False)
            cat = fluid.layers.concat([a, b], axis=1)
            out = fluid.layers.conv2d(cat, 3, 1, param_attr=fluid.ParamAttr(name="out_w"),
                                      bias_attr=False)
            fluid.layers.mean(out)
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
    strength = np.array([1, 4, 2, 3], "float32")[:, None, None, None]
    for name in ("a_w", "b_w"):
        scope.find_var(name).get_tensor().set(np.ones((4, 1, 3, 3), "float32") * strength,
                                              fluid.CPUPlace())
    out_w = np.arange(3 * 8, dtype="float32").reshape(3, 8, 1, 1)
    scope.find_var("out_w").get_tensor().set(out_w, fluid.CPUPlace())
    graph = GraphWrapper(main)
    context = Context(fluid.CPUPlace(), scope, eval_graph=graph.clone(), train_graph=graph)
    context.optimize_graph = graph
    strategy = UniformPruneStrategy(StructurePruner({"*": 0}, {"*": "l1_norm"}),
                                    target_ratio=0.5, pruned_params="._w")
    strategy.on_epoch_begin(context)
    assert strategy.params == ["a_w", "b_w"]
    cut = int(round(4 * strategy.ratios[0]))
    kept = sorted(np.argsort(strength.reshape(-1), kind="stable")[cut:].tolist())
    columns = kept + [4 + k for k in kept]  # out_w's input channels: a's, then b's
    np.testing.assert_array_equal(np.asarray(scope.find_var("out_w").get_tensor()),
                                  out_w[:, columns])
    loss, = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"image": np.ones((2, 1, 8, 8), "float32")},
        fetch_list=[main.global_block().ops[-1].output("Out")[0]], scope=scope)
    assert np.isfinite(loss).all()
