"""Store fluid 1.8.5's slim Compressor runs on a tiny conv net, for
tests/unit/test_slim_compressor.py: a YAML-configured UniformPruneStrategy (the pruned shapes
and ratio, each training batch's loss, each epoch's evaluation, parameters after training) and
a YAML-configured DistillationStrategy with L2, soft-label and FSP distillers against a teacher
(each batch's out_nodes: the total, the student's and each distillation loss; then the
fine-tuning epoch). Every parameter starts from the values stored here, so both sides start
equal. Run with PaddlePaddle 1.8.5 outside the checkout (its Compressor logs each epoch's
exceptions and goes on; the script fails if any happened)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import paddle.fluid as fluid
from paddle.fluid.contrib.slim.core import Compressor
from paddle.fluid.contrib.slim.core import compressor as compressor_module

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import slim_nets  # noqa: E402  (tests/oracle/, beside this script)
from oracle_io import decode, encode, save  # noqa: E402

UNIFORM_YAML = """version: 1.0
pruners:
    pruner_1:
        class: 'StructurePruner'
        pruning_axis:
            '*': 0
        criterions:
            '*': 'l1_norm'
strategies:
    uniform_pruning_strategy:
        class: 'UniformPruneStrategy'
        pruner: 'pruner_1'
        start_epoch: 0
        target_ratio: 0.615
        pruned_params: 'conv.*_weights'
        metric_name: 'acc'
compressor:
    epoch: 2
    strategies:
        - uniform_pruning_strategy
"""

DISTILL_YAML = """version: 1.0
distillers:
    fsp_distiller:
        class: 'FSPDistiller'
        teacher_pairs: [['{t_c1}', '{t_c2}']]
        student_pairs: [['{s_c1}', '{s_c2}']]
        distillation_loss_weight: 0.5
    l2_distiller:
        class: 'L2Distiller'
        teacher_feature_map: '{t_fc}'
        student_feature_map: '{s_fc}'
        distillation_loss_weight: 1
    soft_label_distiller:
        class: 'SoftLabelDistiller'
        student_feature_map: '{s_fc}'
        teacher_feature_map: '{t_fc}'
        student_temperature: 2.0
        teacher_temperature: 3.0
        distillation_loss_weight: 0.1
strategies:
    distillation_strategy:
        class: 'DistillationStrategy'
        distillers: ['fsp_distiller', 'l2_distiller', 'soft_label_distiller']
        start_epoch: 0
        end_epoch: 1
compressor:
    epoch: 2
    strategies:
        - distillation_strategy
"""


def initial_values(program, seed):
    rng = np.random.RandomState(seed)
    values = {}
    for var in sorted(program.list_vars(), key=lambda v: v.name):
        if not var.persistable or var.name.startswith("learning_rate"):
            continue
        shape = list(var.shape)
        if var.name.endswith("bn_variance"):
            values[var.name] = np.ones(shape, "float32")
        elif var.name.endswith("bn_mean"):
            values[var.name] = np.zeros(shape, "float32")
        else:
            values[var.name] = rng.uniform(-0.5, 0.5, shape).astype("float32")
    return values


def samples():
    rng = np.random.RandomState(0)
    return [(rng.randn(1, 8, 8).astype("float32"), np.array([rng.randint(3)], "int64"))
            for _ in range(32)]


DATA = samples()


def reader():
    for i in range(0, 32, 8):
        yield DATA[i:i + 8]


def build(with_teacher):
    main, start = fluid.Program(), fluid.Program()
    teacher, t_start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("image", [None, 1, 8, 8])
        y = fluid.data("label", [None, 1], dtype="int64")
        student = slim_nets.net(fluid, "", x, y)
    test = main.clone(for_test=True)
    out = {"main": main, "start": start, "test": test, "student": student}
    if with_teacher:
        with fluid.program_guard(teacher, t_start):
            tx = fluid.data("image", [None, 1, 8, 8])
            ty = fluid.data("label", [None, 1], dtype="int64")
            out["teacher_vars"] = slim_nets.net(fluid, "teacher_", tx, ty)
        out["teacher"], out["t_start"] = teacher, t_start
    return out


class Recorder:
    """Wraps the SlimGraphExecutor the Compressor makes, keeping every training run's
    out_nodes."""

    def __init__(self):
        self.train = []

    def install(self):
        base = compressor_module.SlimGraphExecutor
        record = self

        class Recording(base):
            def run(self, graph, scope, data=None):
                results = base.run(self, graph, scope, data)
                if graph.compiled_graph is not None and "loss" in graph.out_nodes \
                        and graph.program.num_blocks >= 1 and _is_train(graph):
                    record.train.append({k: float(np.mean(r)) for k, r in
                                         zip(graph.out_nodes.keys(), results)})
                return results
        compressor_module.SlimGraphExecutor = Recording
        self.base = base

    def remove(self):
        compressor_module.SlimGraphExecutor = self.base


def _is_train(graph):
    return any(op.type.endswith("_grad") for op in graph.program.global_block().ops)


def run_case(config_text, with_teacher, seed, allow_errors=False):
    # one name generator for the nets and for what the Compressor adds (optimizer state, the
    # distillers' layers), so that no name is made twice
    with fluid.unique_name.guard():
        return _run_case(config_text, with_teacher, seed, allow_errors)


def _run_case(config_text, with_teacher, seed, allow_errors):
    built = build(with_teacher)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(built["start"])
        if with_teacher:
            exe.run(built["t_start"])
    init = initial_values(built["main"], seed)
    if with_teacher:
        init.update(initial_values(built["teacher"], seed + 1))
    for name, value in init.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    s, names = built["student"], {}
    if with_teacher:
        t = built["teacher_vars"]
        names = {"s_c1": s["c1"].name, "s_c2": s["c2"].name, "s_fc": s["fc"].name,
                 "t_c1": t["c1"].name, "t_c2": t["c2"].name, "t_fc": t["fc"].name}
    work = tempfile.mkdtemp()
    config = os.path.join(work, "compress.yaml")
    with open(config, "w") as f:
        f.write(config_text.format(**names))
    feeds = [("image", "image"), ("label", "label")]
    comp = Compressor(
        fluid.CPUPlace(), scope, built["main"], train_reader=reader, train_feed_list=feeds,
        train_fetch_list=[("loss", s["loss"].name)], eval_program=built["test"],
        eval_reader=reader, eval_feed_list=feeds,
        eval_fetch_list=[("acc", s["acc"].name), ("loss", s["loss"].name)],
        teacher_programs=[built["teacher"]] if with_teacher else [],
        train_optimizer=fluid.optimizer.Momentum(0.05, 0.9),
        distiller_optimizer=fluid.optimizer.Momentum(0.05, 0.9) if with_teacher else None)
    comp.config(config)
    recorder = Recorder()
    recorder.install()
    failed = []
    original = compressor_module._logger.error
    compressor_module._logger.error = lambda *a, **k: failed.append(a)
    try:
        graph = comp.run()
    finally:
        recorder.remove()
        compressor_module._logger.error = original
        shutil.rmtree(work)
    if failed and not allow_errors:
        raise SystemExit(f"fluid's Compressor logged an error: {failed}")
    params = {p.name(): list(p.shape()) for p in graph.all_parameters()}
    final = {n: np.array(scope.find_var(n).get_tensor()) for n in params}
    result = {"init": init, "names": names, "train": recorder.train,
              "eval": {k: [float(v) for v in vals]
                       for k, vals in comp.context.eval_results.items()},
              "shapes": params, "final": final}
    strategy = comp.strategies[0]
    if hasattr(strategy, "ratios"):
        result["ratios"] = [float(r) for r in strategy.ratios]
        result["pruned_params"] = list(strategy.params)
    return result


CASES = {"uniform": (UNIFORM_YAML, False, 5), "distill": (DISTILL_YAML, True, 7)}


if __name__ == "__main__":
    # each case in a process of its own: in one process, fluid 1.8.5's second Compressor run
    # comes out different in its fine-tuning epoch (state kept across runs)
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            json.dump(encode(run_case(*CASES[sys.argv[1]])), f)
        sys.exit(0)
    cases = {"uniform_yaml": UNIFORM_YAML, "distill_yaml": DISTILL_YAML}
    work = tempfile.mkdtemp()
    for name in CASES:
        out = os.path.join(work, name + ".json")
        subprocess.check_call([sys.executable, os.path.abspath(__file__), name, out])
        with open(out) as f:
            cases[name] = decode(json.load(f))
    shutil.rmtree(work)
    save("slim_compress", cases, meta={"fluid": "1.8.5"})
