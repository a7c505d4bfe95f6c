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
from spmd.fluid.contrib.slim.graph import GraphWrapper
from spmd.fluid.contrib.slim.prune import AutoPruneStrategy, StructurePruner
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
