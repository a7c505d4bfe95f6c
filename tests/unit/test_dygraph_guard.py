"""fluid.dygraph imports with every 1.8 name, so static programs that import it run; entering
dygraph mode raises a PreconditionError that says spmd runs static programs and names the
static equivalent; no_grad, declarative, ParallelEnv and disable_dygraph are harmless."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import PreconditionError
from spmd.fluid.dygraph import Linear, nn

DYGRAPH_ALL = [
    "BCELoss", "BackwardStrategy", "BatchNorm", "BilinearTensorProduct", "Conv2D",
    "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "CosineDecay", "DataParallel", "Dropout",
    "Embedding", "ExponentialDecay", "GRUUnit", "GroupNorm", "InstanceNorm", "InverseTimeDecay",
    "L1Loss", "LambdaDecay", "Layer", "LayerList", "LayerNorm", "Linear", "LinearLrWarmup",
    "MSELoss", "MultiStepDecay", "NCE", "NLLLoss", "NaturalExpDecay", "NoamDecay", "PRelu",
    "ParallelEnv", "ParameterList", "PiecewiseDecay", "PolynomialDecay", "Pool2D",
    "ProgramTranslator", "ReduceLROnPlateau", "Sequential", "SpectralNorm", "StepDecay",
    "TracedLayer", "TreeConv", "declarative", "disable_dygraph", "disable_imperative",
    "dygraph_to_static_func", "enable_dygraph", "enable_imperative", "enabled", "grad", "guard",
    "load_dygraph", "no_grad", "prepare_context", "save_dygraph", "to_variable",
]
STATIC = "spmd runs static programs"


def test_every_fluid_18_dygraph_name_imports():
    missing = [n for n in DYGRAPH_ALL if not hasattr(fluid.dygraph, n)]
    assert missing == []
    for sub in ("base", "nn", "layers", "container", "checkpoint", "learning_rate_scheduler",
                "parallel", "jit", "backward_strategy"):
        importlib.import_module(f"spmd.fluid.dygraph.{sub}")
    assert fluid.dygraph.enabled() is False


def test_entering_dygraph_mode_says_how_to_write_it_statically():
    with pytest.raises(PreconditionError, match=STATIC), fluid.dygraph.guard():
        pass
    with pytest.raises(PreconditionError, match=STATIC):
        fluid.dygraph.enable_dygraph()
    with pytest.raises(PreconditionError, match=STATIC):
        fluid.enable_imperative()
    with pytest.raises(PreconditionError, match=r"fluid.data\(name, shape, dtype\)"):
        fluid.dygraph.to_variable(np.ones(2))
    with pytest.raises(PreconditionError, match="static equivalent of fluid.dygraph.Linear is "
                                                "fluid.layers.fc"):
        Linear(4, 2)
    with pytest.raises(PreconditionError, match="fluid.layers.conv2d"):
        nn.Conv2D(3, 4, 3)
    with pytest.raises(PreconditionError, match="with_data_parallel"):
        fluid.dygraph.DataParallel(None, None)
    with pytest.raises(PreconditionError, match="with_data_parallel"):
        fluid.dygraph.prepare_context()
    with pytest.raises(PreconditionError, match="fluid.layers.piecewise_decay"):
        fluid.dygraph.PiecewiseDecay([1], [0.1, 0.01], 0)
    with pytest.raises(PreconditionError, match="fluid.save"):
        fluid.dygraph.save_dygraph({}, "m")

    # a Layer subclass itself builds static programs, as fluid 1.8's does with dygraph off
    # (tests/unit/test_static_dygraph_layers.py)
    class Net(fluid.dygraph.Layer):
        def __init__(self):
            super().__init__()

    with fluid.unique_name.guard():
        assert Net().full_name() == "net_0"


def test_static_program_using_dygraph_helpers_runs():
    @fluid.dygraph.no_grad
    def double(a):
        return a * 2

    @fluid.dygraph.declarative
    def model(x):
        return fluid.layers.scale(x, 3.0)

    fluid.dygraph.disable_dygraph()
    fluid.disable_dygraph()
    fluid.dygraph.ProgramTranslator().enable(False)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.dygraph.no_grad():
        x = fluid.data("x", [2], "float32")
        y = model(x)
    (got,) = fluid.Executor().run(main, feed={"x": np.ones(2, "float32")}, fetch_list=[y])
    np.testing.assert_allclose(got, [3.0, 3.0])
    assert double(2) == 4
    assert fluid.dygraph.ParallelEnv().nranks == 1
    assert fluid.dygraph.BackwardStrategy().sort_sum_gradient is False
