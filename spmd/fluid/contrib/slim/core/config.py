"""fluid.contrib.slim.core.config: ConfigFactory, which reads a slim compression config (YAML:
`version`, the plugin sections pruners / quantizers / distillers / strategies / controllers,
each `name: {class: ..., <constructor args>}`, `compressor: {epoch, strategies, checkpoint_path,
init_model, eval_epoch}` and `include: [other files]`) and builds its instances. An argument
naming an instance built before it (a pruner named by a strategy) is that instance; 'None' is
None. The YAML is read by spmd's reader of slim's subset (yaml_subset), PyYAML not being a
dependency.

>>> import os, tempfile
>>> text = '''version: 1.0
... pruners:
...     pruner_1:
...         class: 'StructurePruner'
...         pruning_axis: {'*': 0}
...         criterions: {'*': 'l1_norm'}
... strategies:
...     uniform:
...         class: 'UniformPruneStrategy'
...         pruner: 'pruner_1'
...         target_ratio: 0.5
...         pruned_params: 'conv.*'
... compressor:
...     epoch: 2
...     strategies:
...         - uniform
... '''
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "compress.yaml")
...     with open(path, "w") as f: _ = f.write(text)
...     factory = ConfigFactory(path)
>>> s = factory.compressor["strategies"][0]
>>> type(s).__name__, s.pruner is factory.instance("pruner_1"), s.target_ratio
('UniformPruneStrategy', True, 0.5)
"""
from __future__ import annotations

import importlib
import inspect
import os

from . import yaml_subset

__all__ = ["ConfigFactory"]

PLUGINS = ["pruners", "quantizers", "distillers", "strategies", "controllers"]

# class name -> the slim module that defines it (imported when a config names it)
_CLASSES = {
    "Pruner": "prune.pruner", "StructurePruner": "prune.pruner",
    "PruneStrategy": "prune.prune_strategy", "UniformPruneStrategy": "prune.prune_strategy",
    "SensitivePruneStrategy": "prune.prune_strategy",
    "AutoPruneStrategy": "prune.auto_prune_strategy",
    "DistillationStrategy": "distillation.distillation_strategy",
    "L2Distiller": "distillation.distiller", "FSPDistiller": "distillation.distiller",
    "SoftLabelDistiller": "distillation.distiller",
    "SAController": "searcher.controller", "EvolutionaryController": "searcher.controller",
    "LightNASStrategy": "nas.light_nas_strategy", "Strategy": "core.strategy",
}


def _slim_class(name, where):
    module = _CLASSES.get(name)
    if module is None:
        raise ValueError(
            f"{where}: class {name!r} is not one of slim's classes spmd provides "
            f"({', '.join(sorted(_CLASSES))}); slim's quantization strategies are not in spmd "
            f"(docs/fluid_coverage.md says why)")
    package = __name__.rsplit(".", 2)[0]  # spmd.fluid.contrib.slim
    return getattr(importlib.import_module(f"{package}.{module}"), name)


class ConfigFactory:
    """The instances a slim config file names (instance(name)) and its compressor section
    (compressor: epoch, strategies as instances, and checkpoint_path / init_model /
    eval_epoch when given)."""

    def __init__(self, config):
        self.instances = {}
        self.compressor = {}
        self.version = None
        self._parse_config(config)

    def instance(self, name):
        """The instance the config built under `name`, or None."""
        return self.instances.get(name)

    def _resolve(self, value):
        if isinstance(value, str) and value.lower() == "none":
            return None
        if isinstance(value, str) and value in self.instances:
            return self.instances[value]
        if isinstance(value, list):
            return [self.instances[v] if isinstance(v, str) and v in self.instances else v
                    for v in value]
        return value

    def _new_instance(self, name, attrs, where):
        if name in self.instances:
            return self.instances[name]
        if not isinstance(attrs, dict) or "class" not in attrs:
            raise ValueError(f"{where}: plugin {name!r} needs a mapping with 'class', got "
                             f"{attrs!r}")
        cls = _slim_class(attrs["class"], where)
        params = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                  if p.kind == p.POSITIONAL_OR_KEYWORD][1:]
        args = {k: self._resolve(attrs[k]) for k in params if k in attrs}
        self.instances[name] = cls(**args)
        return self.instances[name]

    def _parse_config(self, config):
        if not config:
            raise ValueError("ConfigFactory: give the path of a slim config (YAML) file")
        doc = yaml_subset.load(config) or {}
        if not isinstance(doc, dict):
            raise ValueError(f"{config}: a slim config is a mapping at the top, got "
                             f"{type(doc).__name__}")
        for key, value in doc.items():
            if key == "version" and self.version is None:
                self.version = int(value)
            if key in PLUGINS:
                for name, attrs in (value or {}).items():
                    self._new_instance(name, attrs, f"{config}: {key}.{name}")
            if key == "compressor":
                section = value or {}
                if "epoch" not in section:
                    raise ValueError(f"{config}: compressor needs 'epoch'")
                self.compressor["strategies"] = []
                self.compressor["epoch"] = section["epoch"]
                for opt in ("init_model", "checkpoint_path", "eval_epoch"):
                    if opt in section:
                        self.compressor[opt] = section[opt]
                for name in section.get("strategies") or []:
                    strategy = self.instance(name)
                    if strategy is None:
                        raise ValueError(f"{config}: compressor strategy {name!r} is not "
                                         f"defined under 'strategies'")
                    self.compressor["strategies"].append(strategy)
            if key == "include":
                for path in value or []:
                    self._parse_config(os.fspath(path).strip())
