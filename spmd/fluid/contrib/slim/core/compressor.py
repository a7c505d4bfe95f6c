"""fluid.contrib.slim.core.compressor: Compressor, slim's compression pass, and Context, what
its strategies see.

Compressor.run(): the train program gets the train optimizer's backward and update ops (the
optimize graph); each epoch from the checkpoint's on, the strategies' on_epoch_begin, one
epoch of training (on_batch_begin/end around each batch), an evaluation every eval_epoch
epochs (the eval program's out_nodes averaged over the eval reader, or the eval_func
callbacks), a checkpoint, on_epoch_end; then on_compression_end. It returns the eval graph.

Checkpoints (checkpoint_path/<epoch>/): the optimize graph's persistables (model/), the eval
model (eval_model/), the context (epoch and eval results) and the strategies' plain-data state
as JSON (fluid pickles both; spmd never unpickles a file).
"""
from __future__ import annotations

import collections
import json
import logging
import os
import traceback
from collections.abc import Iterable

import numpy as np

from .... import compiler
from ....core import CPUPlace, EOFException
from ....executor import scope_guard
from ....framework import Variable
from ....log_helper import get_logger
from ....reader import DataLoaderBase
from ..graph import GraphWrapper, SlimGraphExecutor
from .config import ConfigFactory

__all__ = ["Context", "Compressor"]

_logger = get_logger(__name__, logging.INFO, fmt="%(asctime)s-%(levelname)s: %(message)s")


def _save_batch(path, batch):
    arrays = {f"s{i}_f{j}": np.asarray(field) for i, sample in enumerate(batch)
              for j, field in enumerate(sample)}
    np.savez(path, **arrays)


def _load_batch(path):
    with np.load(path, allow_pickle=False) as data:
        samples = {}
        for key in data.files:
            i, j = (int(p[1:]) for p in key.split("_"))
            samples.setdefault(i, {})[j] = data[key]
    return [tuple(fields[j] for j in sorted(fields)) for _, fields in sorted(samples.items())]


def cached_reader(reader, sampled_rate, cache_path, cached_id):
    """A reader of a sample of `reader`'s batches (the first, then each with probability
    sampled_rate, numpy seeded by cached_id), cached under cache_path/cached_id so that
    evaluations with the same cached_id see the same batches."""
    np.random.seed(cached_id)
    cache_path = os.path.join(cache_path, str(cached_id))

    def sampled():
        listing = os.path.join(cache_path, "list")
        if os.path.isdir(cache_path) and os.path.exists(listing):
            with open(listing) as f:
                names = [line.strip() for line in f if line.strip()]
            for name in names:
                yield _load_batch(os.path.join(cache_path, name))
            return
        os.makedirs(cache_path, exist_ok=True)
        names = []
        for data in reader():
            if not names or np.random.uniform() < sampled_rate:
                name = f"batch{len(names)}.npz"
                _save_batch(os.path.join(cache_path, name), data)
                names.append(name)
                yield data
        with open(listing, "w") as f:
            f.write("".join(n + "\n" for n in names))

    return sampled


def _started_reader(reader):
    """Whether `reader` is fed by the program itself (a py_reader variable or a
    non-iterable DataLoader) rather than called for batches."""
    return isinstance(reader, Variable) or (
        isinstance(reader, DataLoaderBase) and not reader.iterable)


class Context:
    """What a compression job's strategies share: the place and scope, the train, eval,
    optimize and teacher graphs, the readers, the optimizers, the epoch and batch ids, the
    evaluation results (eval_results: name -> list per evaluation) and a key-value store
    (put / get)."""

    def __init__(self, place, scope, train_graph=None, train_reader=None, eval_graph=None,
                 eval_reader=None, teacher_graphs=None, train_optimizer=None,
                 distiller_optimizer=None, search_space=None):
        self.epoch = 0
        self.epoch_id = 0
        self.batch_id = 0
        self.k_v = {}
        self.place = place
        self.scope = scope
        self.train_graph = train_graph
        self.train_reader = train_reader
        self.eval_graph = eval_graph
        self.eval_reader = eval_reader
        self.executor = None
        self.teacher_graphs = teacher_graphs
        self.train_optimizer = train_optimizer
        self.distiller_optimizer = distiller_optimizer
        self.optimize_graph = None
        self.cache_path = "./eval_cache"
        self.eval_results = {}
        self.skip_training = False
        self.search_space = search_space

    def to_file(self, file_name):
        """Save epoch_id and eval_results (JSON)."""
        with open(file_name, "w") as f:
            json.dump({"epoch_id": self.epoch_id, "eval_results": {
                k: [float(v) for v in vals] for k, vals in self.eval_results.items()}}, f)

    def from_file(self, file_name):
        """Load what to_file saved."""
        with open(file_name) as f:
            data = json.load(f)
        self.epoch_id = int(data["epoch_id"])
        self.eval_results = {k: list(v) for k, v in data["eval_results"].items()}

    def eval_converged(self, metric_name, delta=0.001):
        """Whether the last two evaluations of `metric_name` differ by less than delta,
        relatively."""
        results = self.eval_results.get(metric_name, [])
        if len(results) < 2:
            return False
        before, last = results[-2:]
        _logger.info("Latest evaluations: %s", [before, last])
        return abs(last - before) / before < delta

    def run_eval_graph(self, sampled_rate=None, cached_id=0):
        """Evaluate the eval graph (cloned for test) over eval_reader, or a cached sample of
        it (sampled_rate): (the mean of each out_node over the batches, the out_node keys)."""
        if self.eval_graph is None or self.eval_reader is None:
            raise ValueError("Context.run_eval_graph needs an eval graph and an eval reader "
                             "(give the Compressor eval_program and eval_reader)")
        eval_graph = self.eval_graph.clone(for_test=True)
        executor = SlimGraphExecutor(self.place)
        reader = self.eval_reader
        if sampled_rate:
            if isinstance(reader, Variable) or not sampled_rate > 0:
                raise ValueError(f"run_eval_graph: sampled_rate {sampled_rate} needs a "
                                 f"python reader and a rate > 0")
            reader = cached_reader(reader, sampled_rate, self.cache_path, cached_id)
        results = []
        if _started_reader(reader):
            reader.start()
            try:
                while True:
                    results.append([np.mean(r) for r in executor.run(eval_graph, self.scope)])
            except EOFException:
                reader.reset()
        else:
            for data in reader():
                results.append([np.mean(r) for r in
                                executor.run(eval_graph, self.scope, data=data)])
        result = list(np.mean(np.array(results), axis=0))
        if not isinstance(result, Iterable):
            result = [result]
        _logger.info("Final eval result: %s=%s", list(eval_graph.out_nodes.keys()), result)
        return result, eval_graph.out_nodes.keys()

    def put(self, key, value):
        self.k_v[key] = value

    def get(self, key):
        return self.k_v.get(key)


class Compressor:
    """slim's compression pass over `train_program` (its loss named by train_fetch_list's
    'loss'), see the module doc. Feed and fetch lists are lists of (key, variable name)."""

    def __init__(self, place, scope, train_program, train_reader=None, train_feed_list=None,
                 train_fetch_list=None, eval_program=None, eval_reader=None,
                 eval_feed_list=None, eval_fetch_list=None, eval_func=None,
                 save_eval_model=True, prune_infer_model=None, teacher_programs=(),
                 checkpoint_path=None, train_optimizer=None, distiller_optimizer=None,
                 search_space=None, log_period=20):
        for name, value in (("train_feed_list", train_feed_list),
                            ("eval_feed_list", eval_feed_list)):
            if value is not None and not isinstance(value, list):
                raise TypeError(f"Compressor: {name} should be a list of (key, variable name) "
                                f"tuples, such as [('image', image.name)], got "
                                f"{type(value).__name__}")
        if log_period <= 0:
            raise ValueError(f"Compressor: log_period must be > 0, got {log_period}")
        self.strategies = []
        self.epoch = 0
        self.place = CPUPlace() if place is None else place
        self.scope = scope
        self.train_graph = GraphWrapper(train_program, in_nodes=train_feed_list,
                                        out_nodes=train_fetch_list)
        self.eval_graph = GraphWrapper(eval_program, in_nodes=eval_feed_list,
                                       out_nodes=eval_fetch_list)
        self.train_reader = train_reader
        self.eval_reader = eval_reader
        self.eval_func = eval_func
        self.save_eval_model = save_eval_model
        self.prune_infer_model = prune_infer_model
        self.teacher_graphs = [GraphWrapper(t) for t in teacher_programs]
        self.checkpoint = None
        self.checkpoint_path = checkpoint_path
        self.eval_epoch = 1
        self.train_optimizer = train_optimizer
        self.distiller_optimizer = distiller_optimizer
        self.init_model = None
        self.search_space = search_space
        self.log_period = log_period
        self.context = None
        # (epoch, traceback) of each epoch that raised: fluid logs them and goes on
        self.failed_epochs = []
        # how many training batches' out_node values context.get('train_results') keeps
        self.train_results_kept = 100_000

    def _add_strategy(self, strategy):
        self.strategies.append(strategy)
        self.epoch = max(strategy.end_epoch, self.epoch)

    def config(self, config_file):
        """Take the epochs, strategies, checkpoint_path, init_model and eval_epoch of a slim
        config file (YAML)."""
        factory = ConfigFactory(config_file)
        self.epoch = factory.compressor["epoch"]
        for strategy in factory.compressor["strategies"]:
            self._add_strategy(strategy)
        self.checkpoint_path = factory.compressor.get("checkpoint_path", self.checkpoint_path)
        self.init_model = factory.compressor.get("init_model", self.init_model)
        self.eval_epoch = factory.compressor.get("eval_epoch", self.eval_epoch)
        if not self.eval_epoch > 0:
            raise ValueError(f"{config_file}: eval_epoch must be > 0, got {self.eval_epoch}")

    def _init_model(self, context):
        """Load a compressed model (init_model): parameters, then the graphs' shapes."""
        if not (self.init_model and os.path.exists(self.init_model)):
            return
        exe = SlimGraphExecutor(context.place)
        with scope_guard(context.scope):
            context.train_graph.load_persistables(self.init_model, exe)
        for graph in (context.eval_graph, context.train_graph):
            graph.update_param_shape(context.scope)
            graph.update_groups_of_conv()
        context.train_graph.infer_shape()
        _logger.info("Init model from: %s", self.init_model)

    def _load_checkpoint(self, context):
        if not self.checkpoint_path:
            return context
        if not os.path.exists(self.checkpoint_path):
            _logger.warning("Checkpoint path doesn't exist: [%s]", self.checkpoint_path)
            return context
        epochs = [int(d) for d in os.listdir(self.checkpoint_path)
                  if d.isdigit() and os.path.isdir(os.path.join(self.checkpoint_path, d))]
        if not epochs:
            return context
        latest = os.path.join(self.checkpoint_path, str(max(epochs)))
        context_path = os.path.join(latest, "context")
        strategy_path = os.path.join(latest, "strategies")
        model_path = os.path.join(latest, "model")
        if os.path.exists(context_path):
            context.from_file(context_path)
            context.epoch_id += 1
        if os.path.exists(strategy_path):
            with open(strategy_path) as f:
                states = json.load(f)
            if len(states) != len(self.strategies):
                raise ValueError(
                    f"checkpoint {latest}: {len(states)} strategies saved, the config has "
                    f"{len(self.strategies)}; use a new checkpoint_path for a new config")
            for strategy, state in zip(self.strategies, states):
                strategy.load_checkpoint_state(state)
        for strategy in self.strategies:
            strategy.restore_from_checkpoint(context)
        if os.path.exists(model_path):
            exe = SlimGraphExecutor(context.place)
            with scope_guard(context.scope):
                context.optimize_graph.load_persistables(model_path, exe)
            _logger.info("Loaded params from: %s", model_path)
        return context

    def _save_checkpoint(self, context):
        if not self.checkpoint_path:
            return
        path = os.path.join(self.checkpoint_path, str(context.epoch_id))
        os.makedirs(os.path.join(path, "model"), exist_ok=True)
        exe = SlimGraphExecutor(context.place)
        with scope_guard(context.scope):
            context.optimize_graph.save_persistables(os.path.join(path, "model"), exe)
            if self.save_eval_model:
                context.eval_graph.save_model(os.path.join(path, "eval_model"), exe)
            if self.prune_infer_model:
                context.eval_graph.save_infer_model(
                    os.path.join(path, "eval_model"), exe, self.prune_infer_model,
                    program_only=self.save_eval_model)
        context.to_file(os.path.join(path, "context"))
        with open(os.path.join(path, "strategies"), "w") as f:
            json.dump([s.checkpoint_state() for s in self.strategies], f)
        _logger.info("Saved checkpoint to: %s", path)

    def _train_step(self, context, executor, data=None):
        for strategy in self.strategies:
            strategy.on_batch_begin(context)
        results = executor.run(context.optimize_graph, context.scope, data=data)
        results = [float(np.mean(r)) for r in results]
        if context.batch_id % self.log_period == 0:
            _logger.info("epoch:%d; batch_id:%d; %s = %s", context.epoch_id, context.batch_id,
                         list(context.optimize_graph.out_nodes.keys()),
                         [round(r, 6) for r in results])
        kept = context.k_v.get("train_results")
        if kept is None or kept.maxlen != self.train_results_kept:
            kept = context.k_v["train_results"] = collections.deque(
                kept or (), maxlen=self.train_results_kept)
        kept.append(dict(zip(context.optimize_graph.out_nodes.keys(), results)))
        for strategy in self.strategies:
            strategy.on_batch_end(context)
        context.batch_id += 1

    def _train_one_epoch(self, context):
        if context.skip_training:
            return
        executor = SlimGraphExecutor(self.place)
        graph = context.optimize_graph
        if graph.compiled_graph is None:
            strategy = compiler.BuildStrategy()
            strategy.fuse_all_reduce_ops = False
            graph.compiled_graph = compiler.CompiledProgram(graph.program).with_data_parallel(
                loss_name=graph.out_nodes["loss"], build_strategy=strategy)
        if _started_reader(context.train_reader):
            context.train_reader.start()
            try:
                while True:
                    self._train_step(context, executor)
            except EOFException:
                context.train_reader.reset()
        else:
            for data in context.train_reader():
                self._train_step(context, executor, data)
        context.batch_id = 0

    def _eval(self, context):
        if self.eval_func is not None:
            for key, func in self.eval_func.items():
                context.eval_results.setdefault(key, []).append(
                    func(self.eval_graph.program, self.scope))
        else:
            results, names = context.run_eval_graph()
            for name, result in zip(names, results):
                context.eval_results.setdefault(name, []).append(result)

    def run(self):
        """Run the compression; returns the (compressed) eval graph. The Context is
        self.context; context.get('train_results') holds the last train_results_kept
        training batches' out_node values (dicts, in order)."""
        context = Context(place=self.place, scope=self.scope, train_graph=self.train_graph,
                          train_reader=self.train_reader, eval_graph=self.eval_graph,
                          eval_reader=self.eval_reader, teacher_graphs=self.teacher_graphs,
                          train_optimizer=self.train_optimizer,
                          distiller_optimizer=self.distiller_optimizer,
                          search_space=self.search_space)
        self.context = context
        if self.teacher_graphs:
            context.put("teachers", self.teacher_graphs)
        self._init_model(context)
        if not context.optimize_graph:
            if context.train_optimizer:
                context.train_optimizer._name = "train_opt"
                context.optimize_graph = context.train_graph.get_optimize_graph(
                    context.train_optimizer, context.place, context.scope)
            else:
                context.optimize_graph = context.train_graph
        context = self._load_checkpoint(context)
        for strategy in self.strategies:
            strategy.on_compression_begin(context)
        for epoch in range(context.epoch_id, self.epoch):
            context.epoch_id = epoch
            try:
                for strategy in self.strategies:
                    strategy.on_epoch_begin(context)
                self._train_one_epoch(context)
                if self.eval_epoch and epoch % self.eval_epoch == 0:
                    self._eval(context)
                self._save_checkpoint(context)
                for strategy in self.strategies:
                    strategy.on_epoch_end(context)
            except Exception:  # fluid 1.8 logs a failed epoch and goes on to the next
                text = traceback.format_exc()
                _logger.error("epoch %d failed:\n%s", epoch, text)
                self.failed_epochs.append((epoch, text))
                continue
        for strategy in self.strategies:
            strategy.on_compression_end(context)
        return context.eval_graph
