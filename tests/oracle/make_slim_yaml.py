"""Store what PyYAML (the reader fluid 1.8.5's slim ConfigFactory uses) makes of slim-style
compression configs, for tests/unit/test_slim_config.py, which reads them with spmd's YAML
subset reader (spmd does not depend on PyYAML). Run with the oracle's Python (it has PyYAML)
outside the checkout."""
import os
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from oracle_io import save  # noqa: E402

DOCS = {
    "pruning": """#start_epoch:  The 'on_epoch_begin' function will be called in start_epoch.
#target_ratio: The flops ratio to be pruned from current model.
version: 1.0
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
        start_epoch: 1
        delta_rate: 0.2
        target_ratio: 0.08
        num_steps: 1
        eval_rate: 0.5
        pruned_params: 'conv6_sep_weights'
        sensitivities_file: 'mobilenet_acc_top1_sensitive.data'
        metric_name: 'acc_top1'
compressor:
    epoch: 1
    checkpoint_path: './checkpoints_pruning/'
    strategies:
        - sensitive_pruning_strategy
""",
    "distillation": """version: 1.0
distillers:
    fsp_distiller:
        class: 'FSPDistiller'
#        teacher_pairs: [['teacher_depthwise_conv2d_1.tmp_0', 'teacher_conv2d_3.tmp_0']]
        teacher_pairs: [['teacher_conv2_1_dw.tmp_0', 'teacher_conv1.tmp_0']]
        student_pairs: [['student_conv2_1_dw.tmp_0', "student_conv1.tmp_0"]]
        distillation_loss_weight: 1
    l2_distiller:
        class: 'L2Distiller'
        teacher_feature_map: 'teacher.tmp_2'
        student_feature_map: 'student.tmp_2'
        distillation_loss_weight: 1
strategies:
    distillation_strategy:
        class: 'DistillationStrategy'
        distillers: ['fsp_distiller', 'l2_distiller']
        start_epoch: 0
        end_epoch: 1
compressor:
    epoch: 1
    checkpoint_path: './distillation_checkpoints/'
    strategies:
        - distillation_strategy
""",
    "light_nas": """version: 1.0
controllers:
    sa_controller:
        class: 'SAController'
        reduce_rate: 0.9
        init_temperature: 1024
        max_iter_number: 300
strategies:
    light_nas_strategy:
        class: 'LightNASStrategy'
        controller: 'sa_controller'
        target_flops: 629145600
        target_latency: 163
        end_epoch: 2
        retrain_epoch: 1
        metric_name: 'acc_top1'
        is_server: 1
        max_client_num: 100
        search_steps: 2
compressor:
    epoch: 2
    strategies:
        - light_nas_strategy
""",
    "scalars": """version: 1.0
include: ["./configs/pruners.yaml", './configs/pruners_0.yaml']
strategies:
    strategy_1:
        class: 'SensitivePruneStrategy'
        pruner: 'pruner_2'
        start_epoch: 0
        end_epoch: 10
        delta_rate: 0.20
        acc_loss_threshold: 0.2
        sensitivities:
            'conv1_1.w': 0.4
        dirname: None
        save_as_int8: False
        flags: [True, false, yes, No, on, OFF, ~, null, Null]
        numbers: [0, -3, +4, 1_000, 2.5, -0.5, .5, 1., 1e3, 1.0e-3, 1.5e+2, 0.1e3]
        words: [abc, 'a b', "c\\td", 'it''s', a.b_c-d, 12abc, 0.5x]
        empty_flow: []
        empty_map: {}
        inline_map: {a: 1, 'b': [x, y], c: {d: e}}
        nested: [[1, [2, 3]], [], ['x', "y"]]
        multi_line: [[a, b],
                     [c, d]]
        colon_in_value: 'a: b'
        hash_in_value: 'a # b'
        url: http://x/y
    strategy_2:
        class: 'UniformPruneStrategy'
        pruned_params: '.*_sep_weights'
compressor:
  epoch: 100
  strategies:
  - strategy_1
  - strategy_2
  items:
    -
      nested_after_dash: 1
    - key: 1
      other: two
    - - inner
      - list
""",
}

if __name__ == "__main__":
    save("slim_yaml", {"docs": DOCS,
                       "parsed": {k: yaml.safe_load(v) for k, v in DOCS.items()}},
         meta={"pyyaml": yaml.__version__})
