"""slim's YAML configs read without PyYAML: spmd's subset reader gives what PyYAML gives on
slim-style configs (tests/oracle/make_slim_yaml.py), refuses what it does not read by line;
ConfigFactory builds the named instances, resolves references, includes other files, and the
Compressor takes its epochs, checkpoint path and strategies."""
import pytest

import spmd.fluid as fluid
from spmd.fluid.contrib.slim.core import Compressor, ConfigFactory
from spmd.fluid.contrib.slim.core.yaml_subset import YamlSubsetError, load, load_text
from spmd.fluid.contrib.slim.distillation import (
    DistillationStrategy,
    FSPDistiller,
    L2Distiller,
)
from spmd.fluid.contrib.slim.nas import LightNASStrategy
from spmd.fluid.contrib.slim.prune import StructurePruner, UniformPruneStrategy
from spmd.fluid.contrib.slim.searcher import SAController
from tests.oracle_io import load as load_oracle

YAML = load_oracle("slim_yaml")


@pytest.mark.parametrize("name", sorted(YAML["docs"]))
def test_reads_as_pyyaml(name):
    assert load_text(YAML["docs"][name]) == YAML["parsed"][name]


def test_scalar_types_as_pyyaml():
    doc = load_text(YAML["docs"]["scalars"])["strategies"]["strategy_1"]
    assert doc["numbers"][:6] == [0, -3, 4, 1000, 2.5, -0.5]
    assert doc["numbers"][8:] == ["1e3", 0.001, 150.0, "0.1e3"]  # YAML 1.1: a dot, a sign
    assert doc["flags"] == [True, False, True, False, True, False, None, None, None]
    assert doc["dirname"] == "None" and doc["save_as_int8"] is False
    assert doc["words"][2:4] == ["c\td", "it's"]


@pytest.mark.parametrize("text, why", [
    ("a: &anchor 1\nb: *anchor\n", "anchors"),
    ("a: |\n  text\n", "block scalars"),
    ("a: [1, 2\n", "unclosed"),
    ("a: 1\n  b: 2\n", "indentation"),
    ("a: 'open\n", "unterminated"),
    ("---\na: 1\n---\nb: 2\n", "multiple documents"),
])
def test_refuses_by_line(text, why):
    with pytest.raises(YamlSubsetError, match=why) as info:
        load_text(text, "conf.yaml")
    assert "conf.yaml:" in str(info.value)


def test_empty_and_comment_only():
    assert load_text("") is None
    assert load_text("# nothing\n\n") is None
    assert load_text("a:\nb: 1\n") == {"a": None, "b": 1}


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_factory_builds_and_resolves(tmp_path):
    factory = ConfigFactory(_write(tmp_path, "d.yaml", YAML["docs"]["distillation"]))
    assert factory.version == 1
    strategy = factory.compressor["strategies"][0]
    assert isinstance(strategy, DistillationStrategy)
    assert (strategy.start_epoch, strategy.end_epoch) == (0, 1)
    fsp, l2 = strategy.distillers
    assert isinstance(fsp, FSPDistiller) and isinstance(l2, L2Distiller)
    assert fsp is factory.instance("fsp_distiller")
    assert fsp.teacher_pairs == [["teacher_conv2_1_dw.tmp_0", "teacher_conv1.tmp_0"]]
    assert l2.student_feature_map == "student.tmp_2"
    assert factory.compressor["checkpoint_path"] == "./distillation_checkpoints/"
    assert factory.instance("nothing") is None

    nas = ConfigFactory(_write(tmp_path, "n.yaml", YAML["docs"]["light_nas"]))
    light = nas.compressor["strategies"][0]
    assert isinstance(light, LightNASStrategy)
    assert isinstance(nas.instance("sa_controller"), SAController)
    assert light.end_epoch == 2


def test_factory_include_and_none(tmp_path):
    pruners = _write(tmp_path, "pruners.yaml", "pruners:\n  p1:\n    class: 'StructurePruner'\n"
                     "    pruning_axis: {'*': 0}\n    criterions: {'*': 'l1_norm'}\n")
    main = _write(tmp_path, "main.yaml", f"version: 1.0\ninclude: ['{pruners}']\n"
                  "strategies:\n  u:\n    class: 'UniformPruneStrategy'\n    pruner: 'p1'\n"
                  "    metric_name: None\n    target_ratio: 0.3\n"
                  "compressor:\n  epoch: 3\n  eval_epoch: 2\n  strategies: [u]\n")
    factory = ConfigFactory(main)
    u = factory.compressor["strategies"][0]
    assert isinstance(u, UniformPruneStrategy) and isinstance(u.pruner, StructurePruner)
    assert u.metric_name is None and u.target_ratio == 0.3
    assert u.pruner.pruning_axis == {"*": 0}

    with fluid.unique_name.guard():
        program = fluid.Program()
        with fluid.program_guard(program, fluid.Program()):
            fluid.data("x", [None, 2])
    comp = Compressor(fluid.CPUPlace(), fluid.Scope(), program)
    comp.config(main)
    assert comp.epoch == 3 and comp.eval_epoch == 2
    assert [type(s).__name__ for s in comp.strategies] == ["UniformPruneStrategy"]
    assert comp.strategies[0].target_ratio == 0.3


def test_factory_errors_name_the_problem(tmp_path):
    bad_class = _write(tmp_path, "a.yaml", "strategies:\n  q:\n    class: 'QuantizationStrategy'\n")
    with pytest.raises(ValueError, match="QuantizationStrategy.*quantization"):
        ConfigFactory(bad_class)
    missing = _write(tmp_path, "b.yaml", "compressor:\n  epoch: 1\n  strategies: [nowhere]\n")
    with pytest.raises(ValueError, match="'nowhere' is not defined"):
        ConfigFactory(missing)
    no_epoch = _write(tmp_path, "c.yaml", "compressor:\n  strategies: []\n")
    with pytest.raises(ValueError, match="needs 'epoch'"):
        ConfigFactory(no_epoch)
    assert load(bad_class)["strategies"]["q"]["class"] == "QuantizationStrategy"
