"""LayerHelper gives each parameter exactly one initializer op in the startup program, however
many layers share it and in whatever order programs are built (the index of written names it
keeps per block must agree with a scan of the ops)."""
from __future__ import annotations

from collections import Counter

import spmd.fluid as fluid


def init_counts(startup) -> Counter:
    return Counter(n for op in startup.global_block().ops for n in op.output_arg_names)


def test_every_parameter_initialized_once_in_a_deep_model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        for _ in range(200):
            x = fluid.layers.fc(x, 4, act="relu")
    params = [p.name for p in main.all_parameters()]
    assert len(params) == 400
    counts = init_counts(startup)
    assert all(counts[p] == 1 for p in params)


def test_shared_parameter_is_initialized_once():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        for _ in range(5):
            x = fluid.layers.fc(x, 4, param_attr=fluid.ParamAttr(name="shared_w"),
                                bias_attr=fluid.ParamAttr(name="shared_b"))
    counts = init_counts(startup)
    assert counts["shared_w"] == 1 and counts["shared_b"] == 1


def test_programs_built_in_turns_each_get_their_initializers():
    progs = [(fluid.Program(), fluid.Program()) for _ in range(2)]
    with fluid.unique_name.guard():
        for _ in range(3):
            for main, startup in progs:
                with fluid.program_guard(main, startup):
                    x = fluid.data(name="x", shape=[None, 4], dtype="float32")
                    fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="w"))
    for main, startup in progs:
        counts = init_counts(startup)
        assert counts["w"] == 1
        biases = [p.name for p in main.all_parameters() if p.name != "w"]
        assert len(biases) == 3 and all(counts[b] == 1 for b in biases)
