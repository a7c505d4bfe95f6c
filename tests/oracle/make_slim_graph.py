"""Store fluid 1.8.5's slim GraphWrapper measures (flops, flops of the convolutions, number of
parameter elements; the neighbours of an op) of the tiny conv net of make_slim_compress.py,
and the sensitivities a YAML-configured SensitivePruneStrategy measures on it (the metric's
loss with each parameter pruned by each ratio), for tests/unit/test_slim_prune.py. (fluid's
search for the ratios then fails on this net: a parameter whose losses are all 0 fits a cubic
with a 0 leading coefficient, and numpy.roots raises; spmd's fit takes it.) Run with PaddlePaddle
1.8.5 outside the checkout (it writes the sensitivities file in the working directory)."""
import os
import pickle
import sys

import paddle.fluid as fluid
from paddle.fluid.contrib.slim.graph import GraphWrapper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from make_slim_compress import build, run_case  # noqa: E402
from oracle_io import save  # noqa: E402

SENSITIVE_YAML = """version: 1.0
pruners:
    pruner_1:
        class: 'StructurePruner'
        pruning_axis:
            '*': 0
        criterions:
            '*': 'l1_norm'
strategies:
    sensitive_pruning_strategy:
        class: 'SensitivePruneStrategy'
        pruner: 'pruner_1'
        start_epoch: 0
        delta_rate: 0.25
        target_ratio: 0.4
        num_steps: 1
        pruned_params: 'conv.*_weights'
        sensitivities_file: 'slim_sensitivities.data'
        metric_name: 'acc'
compressor:
    epoch: 1
    strategies:
        - sensitive_pruning_strategy
"""


def measures():
    with fluid.unique_name.guard():
        built = build(False)
    graph = GraphWrapper(built["test"])
    ops = graph.ops()
    conv2 = [op for op in ops if op.type() == "conv2d"][1]
    return {"flops": float(graph.flops()), "conv_flops": float(graph.flops(only_conv=True)),
            "numel": int(graph.numel_params()),
            "op_types": [op.type() for op in ops],
            "conv2_pre": sorted(op.type() for op in graph.pre_ops(conv2)),
            "conv2_next": sorted(op.type() for op in graph.next_ops(conv2)),
            "params": sorted(p.name() for p in graph.all_parameters())}


if __name__ == "__main__":
    if os.path.exists("slim_sensitivities.data"):
        os.remove("slim_sensitivities.data")
    run_case(SENSITIVE_YAML, False, 5, allow_errors=True)
    sensitive = {}
    with open("slim_sensitivities.data", "rb") as f:
        table = pickle.load(f)
    sensitive["sensitivities"] = {
        name: {"pruned_percent": [float(p) for p in entry["pruned_percent"]],
               "loss": [float(v) for v in entry["loss"]]}
        for name, entry in table.items()}
    os.remove("slim_sensitivities.data")
    save("slim_graph", {"measures": measures(), "sensitive": sensitive,
                        "sensitive_yaml": SENSITIVE_YAML}, meta={"fluid": "1.8.5"})
    print(sensitive)
