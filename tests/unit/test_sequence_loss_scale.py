"""Which data-parallel programs seed their loss gradient with each place's share of the batch
(c_loss_grad_share) instead of 1 / num_devices: LoD programs whose loss is a mean, trained on
several devices with CoeffNumDevice. (tests/dist/mpi/test_lod_data_parallel.py shows it makes
uneven sequence shares equal one process.)"""
from __future__ import annotations

import pytest

import spmd.fluid as fluid
from spmd.core.operator import OpRole
from spmd.passes.common import PassContext
from spmd.passes.registry import PASSES


def program(lod_level: int, reduce: str = "mean"):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[3], dtype="float32", lod_level=lod_level)
        h = fluid.layers.fc(x, 2)
        if lod_level:
            h = fluid.layers.sequence_pool(h, "sum")
        loss = getattr(fluid.layers, reduce)(h)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, loss


def seed_op(main, loss):
    grad = main.grad_var_map[loss.name]
    (op,) = [op for op in main.global_block().ops
             if op.role is OpRole.LOSS and grad in op.output_arg_names]
    return op


@pytest.mark.parametrize("lod_level,devices,strategy,reduce,expected", [
    (1, 2, "CoeffNumDevice", "mean", "c_loss_grad_share"),
    (0, 2, "CoeffNumDevice", "mean", "fill_constant"),  # dense: fluid's 1 / num_devices
    (1, 1, "CoeffNumDevice", "mean", "fill_constant"),  # one device: the whole batch
    (1, 2, "One", "mean", "fill_constant"),
    (1, 2, "CoeffNumDevice", "reduce_sum", "fill_constant"),  # not an average: 1 / N
])
def test_the_seed(lod_level, devices, strategy, reduce, expected):
    main, loss = program(lod_level, reduce)
    build = fluid.BuildStrategy()
    build.gradient_scale_strategy = getattr(fluid.BuildStrategy.GradientScaleStrategy,
                                            strategy)
    ctx = PassContext(main, build, devices, loss.name)
    PASSES.run(ctx)
    op = seed_op(main, loss)
    assert op.type == expected
    if expected == "fill_constant" and strategy == "CoeffNumDevice":
        assert op.attrs["value"] == pytest.approx(1.0 / devices)
