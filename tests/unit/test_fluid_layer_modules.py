"""fluid.layers' submodules import by fluid 1.8's names (`import paddle.fluid.layers.ops as
ops`, as model-zoo code does) and hold the same objects as fluid.layers; a name fluid's module
has and spmd lacks says so. The name table in spmd matches the one stored from fluid 1.8.5."""
from __future__ import annotations

import importlib

import pytest
from oracle_io import load

import spmd.fluid as fluid
from spmd.fluid.layers.fluid_modules import FLUID_MODULES

STORED = load("layer_names")  # tests/oracle/make_layer_names.py, run in fluid 1.8.5


@pytest.mark.parametrize("module", sorted(STORED))
def test_the_table_is_fluid_185s(module):
    assert sorted(FLUID_MODULES[module]) == sorted(STORED[module])


@pytest.mark.parametrize("module", sorted(FLUID_MODULES))
def test_each_module_imports_and_holds_fluid_layers_objects(module):
    mod = importlib.import_module(f"spmd.fluid.layers.{module}")
    assert getattr(fluid.layers, module) is mod
    for name in mod.__all__:
        assert getattr(mod, name) is getattr(fluid.layers, name), name
    for name in set(FLUID_MODULES[module]) - set(mod.__all__):
        with pytest.raises(AttributeError, match=rf"fluid\.layers\.{module}\.{name} is in "
                                                 r"fluid 1\.8 but not in spmd yet"):
            getattr(mod, name)


def test_model_zoo_imports():
    import spmd.fluid.layers.ops as ops
    from spmd.fluid.layers.learning_rate_scheduler import _decay_step_counter

    assert ops.cos is fluid.layers.cos and callable(_decay_step_counter)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_layer'"):
        fluid.layers.nn.no_such_layer  # noqa: B018
