"""fluid.contrib.slim.prune.prune_strategy: filter pruning as slim does it.

Pruning a convolution's filters (axis 0 of its weight, the output channels, chosen by the
pruner's criterion) cuts, along the same channels, everything downstream that reads them: the
bias added to its output, a following batch_norm's scale, bias, mean and variance, a depthwise
convolution's filters, the input channels (axis 1) of the next convolution, the rows of a
following fc's weight (each channel's H*W rows), with the channel offset a concat puts them
at; and the accumulators the optimizer keeps for each of those (velocity, moments) when they
have the parameter's shape. The walk stops at the next convolution and at an fc. Unlike
fluid 1.8, a concat of two pruned inputs offsets the second by what is left of the first and
cuts the next convolution's input channels for both.

- PruneStrategy: that machinery (the base).
- UniformPruneStrategy: at start_epoch, one ratio for every parameter matching pruned_params,
  found by bisection so that the eval graph loses target_ratio of its FLOPs (within 0.01).
- SensitivePruneStrategy: a ratio per parameter from its sensitivity (the metric's loss when
  it alone is pruned by delta_rate, 2 * delta_rate, ...; a cubic fitted to them), bisecting on
  the loss level that prunes target_ratio of the FLOPs, in num_steps steps. Sensitivities are
  kept in sensitivities_file (JSON; fluid pickles it).
"""
from __future__ import annotations

import copy
import json
import logging
import os
import re

import numpy as np

from ....log_helper import get_logger
from ..core.strategy import Strategy
from ..graph import GraphWrapper, OpWrapper, VarWrapper

__all__ = ["SensitivePruneStrategy", "UniformPruneStrategy", "PruneStrategy"]

_logger = get_logger(__name__, logging.INFO, fmt="%(asctime)s-%(levelname)s: %(message)s")


# a bisection stops when its interval is this narrow: fluid's loops run until the FLOPs hit the
# target within a tolerance, forever when the channel counts cannot (fluid then hangs)
BISECTION_WIDTH = 1e-6


def _is_backward(op):
    return op.is_bwd_op() or op.op.role.value == "backward"


class PruneStrategy(Strategy):
    """The base of the prune strategies: `pruner` (a StructurePruner) picks the channels,
    `pruned_params` (a regular expression, re.match) the parameters, `target_ratio` the FLOPs
    share to remove, `metric_name` the eval out_node measuring the model."""

    def __init__(self, pruner=None, start_epoch=0, end_epoch=0, target_ratio=0.5,
                 metric_name=None, pruned_params="conv.*_weights"):
        super().__init__(start_epoch, end_epoch)
        self.pruner = pruner
        self.target_ratio = target_ratio
        self.metric_name = metric_name
        self.pruned_params = pruned_params
        self.pruned_list = [[], []]
        self._cut_channels = {}

    def _eval_graph(self, context, sampled_rate=None, cached_id=0):
        results, names = context.run_eval_graph(sampled_rate, cached_id)
        names = list(names)
        if self.metric_name not in names:
            raise ValueError(f"{type(self).__name__}: metric_name {self.metric_name!r} is not "
                             f"an eval out_node ({names})")
        return float(np.mean(results[names.index(self.metric_name)]))

    # -- cutting tensors -------------------------------------------------------------------
    def _cut(self, scope, params, pruned_idx, axis, place, lazy, only_graph,
             param_backup, param_shape_backup, source=None):
        """Cut `pruned_idx` out of each of `params` along `axis` (or zero them: lazy), in the
        scope (unless only_graph) and in the declared shapes, keeping backups when asked.
        A parameter's filters (axis 0) are cut once; its input channels (axis 1) once per
        pruned parameter whose channels reach it (`source`: two pruned convolutions
        concatenated into a third both cut its input channels; fluid cuts the first's only)."""
        key = params[0].name() if axis == 0 or source is None else (params[0].name(), source)
        if key in self.pruned_list[axis]:
            return
        for param in params:
            tensor = scope.find_var(param.name()).get_tensor()
            value = np.array(tensor)
            if param_backup is not None and param.name() not in param_backup:
                param_backup[param.name()] = value.copy()
            pruned = self.pruner.prune_tensor(value, pruned_idx, pruned_axis=axis, lazy=lazy)
            if not only_graph:
                tensor.set(pruned, place)
            if param_shape_backup is not None and param.name() not in param_shape_backup:
                param_shape_backup[param.name()] = copy.deepcopy(param.shape())
            shape = list(param.shape())
            shape[axis] = pruned.shape[axis]
            param.set_shape(shape)
            _logger.debug("pruned %s on axis %d to %s", param.name(), axis, shape)
            self.pruned_list[axis].append(key if param is params[0] else param.name())

    def _prune_filters_by_ratio(self, scope, params, ratio, place, lazy=False,
                                only_graph=False, param_shape_backup=None, param_backup=None):
        """Prune `ratio` of params[0]'s filters (axis 0) by the pruner's criterion, and the
        same indices of the others (its accumulators); returns the indices."""
        if params[0].name() in self.pruned_list[0]:
            return None
        value = np.array(scope.find_var(params[0].name()).get_tensor())
        pruned_idx = self.pruner.cal_pruned_idx(params[0].name(), value, ratio, axis=0)
        self._cut(scope, params, pruned_idx, 0, place, lazy, only_graph, param_backup,
                  param_shape_backup)
        return pruned_idx

    def _prune_parameter_by_idx(self, scope, params, pruned_idx, pruned_axis, place,
                                lazy=False, only_graph=False, param_shape_backup=None,
                                param_backup=None, source=None):
        self._cut(scope, params, pruned_idx, pruned_axis, place, lazy, only_graph,
                  param_backup, param_shape_backup, source)

    # -- the walk --------------------------------------------------------------------------
    def _forward_search_related_op(self, graph, param):
        """The forward ops reached from the readers of `param`, depth first, stopping at the
        next convolution and at a mul (fc)."""
        if not isinstance(param, VarWrapper):
            raise TypeError(f"expected a VarWrapper, got {type(param).__name__}")
        ops = graph.ops()
        readers = {}
        for op in ops:
            for name in set(op.op.input_arg_names):
                readers.setdefault(name, []).append(op)
        visited = set()
        path = []
        stack = [op for op in ops if not _is_backward(op)
                 and param.name() in op.op.input_arg_names]
        while stack:
            top = stack[-1]
            if id(top.op) not in visited:
                visited.add(id(top.op))
                path.append(top)
            stop = (top.type() == "conv2d" and param.name() not in top.op.input_arg_names) \
                or top.type() == "mul"
            following = [] if stop else self._get_next_unvisited_op(graph, visited, top,
                                                                    readers)
            if following:
                stack += following
            else:
                stack.pop()
        return path

    def _get_next_unvisited_op(self, graph, visited, top_op, readers=None):
        """The forward ops reading an output of `top_op` not visited yet."""
        if not isinstance(top_op, OpWrapper):
            raise TypeError(f"expected an OpWrapper, got {type(top_op).__name__}")
        following = graph.next_ops(top_op) if readers is None else [
            op for name in top_op.op.output_arg_names for op in readers.get(name, [])]
        out, seen = [], set()
        for op in following:
            if id(op.op) not in visited and id(op.op) not in seen and not _is_backward(op):
                seen.add(id(op.op))
                out.append(op)
        return out

    def _get_accumulator(self, graph, param):
        """The optimizer's accumulators of `param` that have its shape (the persistable
        outputs, other than the parameter, of the update op writing it)."""
        found = []
        for op in param.outputs():
            if op.is_opt_op():
                for var in op.all_outputs():
                    if (graph.is_persistable(var) and var.name() != param.name()
                            and tuple(var.shape()) == tuple(param.shape())
                            and var not in found):
                        found.append(var)
        return found

    def _with_accumulators(self, graph, var):
        return [var] + self._get_accumulator(graph, var)

    def _forward_pruning_ralated_params(self, graph, scope, param, place, ratio=None,
                                        pruned_idxs=None, lazy=False, only_graph=False,
                                        param_backup=None, param_shape_backup=None):
        """Prune `param`'s filters (by `ratio`, or the given indices) and everything the
        walk reaches (see the module doc)."""
        if not isinstance(graph, GraphWrapper):
            raise TypeError("graph must be a slim GraphWrapper")
        if param.name() in self.pruned_list[0]:
            return
        related = self._forward_search_related_op(graph, param)
        common = dict(place=place, lazy=lazy, only_graph=only_graph,
                      param_backup=param_backup, param_shape_backup=param_shape_backup)
        if ratio is None:
            if pruned_idxs is None:
                raise ValueError("give a ratio or the pruned indices")
            self._prune_parameter_by_idx(scope, self._with_accumulators(graph, param),
                                         pruned_idxs, pruned_axis=0, **common)
        else:
            pruned_idxs = self._prune_filters_by_ratio(
                scope, self._with_accumulators(graph, param), ratio, place, lazy=lazy,
                only_graph=only_graph, param_shape_backup=param_shape_backup,
                param_backup=param_backup)
        corrected = list(pruned_idxs)
        for op in related:  # the channels each variable on the walk lost
            if op.type() == "mul" or (op.type() == "conv2d" and
                                      param.name() not in op.op.input_arg_names):
                continue
            for name in set(op.op.output_arg_names):
                self._cut_channels[name] = self._cut_channels.get(name, 0) + len(pruned_idxs)
        for i, op in enumerate(related):
            kind = op.type()
            params = [v for v in op.all_inputs() if graph.is_parameter(v)]
            if kind == "conv2d" and param.name() not in op.op.input_arg_names:
                for p in params:
                    self._prune_parameter_by_idx(scope, self._with_accumulators(graph, p),
                                                 corrected, pruned_axis=1,
                                                 source=param.name(), **common)
            elif kind == "depthwise_conv2d":
                for p in params:
                    self._prune_parameter_by_idx(scope, self._with_accumulators(graph, p),
                                                 corrected, pruned_axis=0, **common)
            elif kind == "elementwise_add":
                for p in params:
                    self._prune_parameter_by_idx(scope, self._with_accumulators(graph, p),
                                                 pruned_idxs, pruned_axis=0, **common)
            elif kind == "mul":  # an fc: each channel is H*W rows of its weight
                fc_input = next(v for v in op.inputs("X"))
                fc_param = op.inputs("Y")[0]
                shape = fc_input.shape()
                size = int(np.prod(shape[2:])) if len(shape) > 2 else 1
                corrected = [c * size + k for c in corrected for k in range(size)]
                self._prune_parameter_by_idx(scope, self._with_accumulators(graph, fc_param),
                                             corrected, pruned_axis=0, **common)
            elif kind == "concat":
                # the input this walk reached (fluid takes the previous op's output) sits
                # after the channels of the inputs before it, less those cut from them
                # earlier in this pruning (their declared shapes are not updated; fluid
                # counts them as declared)
                inputs = op.inputs("X")
                reached = {n for prior in related[:i] for n in prior.op.output_arg_names}
                where = next((k for k, v in enumerate(inputs) if v.name() in reached), 0)
                offset = sum(inputs[k].shape()[1] - self._cut_channels.get(inputs[k].name(), 0)
                             for k in range(where))
                corrected = [x + offset for x in pruned_idxs]
            elif kind == "batch_norm":
                for slot in ("Mean", "Variance", "Scale", "Bias"):
                    for v in op.inputs(slot):
                        self._prune_parameter_by_idx(scope, self._with_accumulators(graph, v),
                                                     corrected, pruned_axis=0, **common)

    def _prune_parameters(self, graph, scope, params, ratios, place, lazy=False,
                          only_graph=False, param_backup=None, param_shape_backup=None):
        """Prune each of `params` (names) by its ratio, with all that depends on it."""
        params, ratios = list(params), list(ratios)
        if len(params) != len(ratios):
            raise ValueError(f"{len(params)} parameters but {len(ratios)} ratios")
        self.pruned_list = [[], []]
        self._cut_channels = {}
        for name, ratio in zip(params, ratios):
            if not isinstance(name, str):
                raise TypeError(f"parameters are given by name, got {type(name).__name__}")
            self._forward_pruning_ralated_params(
                graph, scope, graph.var(name), place, ratio=ratio, lazy=lazy,
                only_graph=only_graph, param_backup=param_backup,
                param_shape_backup=param_shape_backup)

    def _prune_graph(self, graph, target_graph):
        """Give `graph`'s parameters the shapes they have in `target_graph`."""
        for param in target_graph.all_parameters():
            graph.var(param.name()).set_shape(param.shape())

    def _restore_shapes(self, graph, param_shape_backup):
        for name, shape in param_shape_backup.items():
            graph.var(name).set_shape(shape)

    def _matching_params(self, graph):
        return [p.name() for p in graph.all_parameters()
                if re.match(self.pruned_params, p.name())]

    def _pruned_flops(self, context, params, ratios, flops):
        """The FLOPs share the eval graph loses with `params` pruned by `ratios` (its shapes
        only, restored afterwards)."""
        backup = {}
        self._prune_parameters(context.eval_graph, context.scope, params, ratios,
                               context.place, only_graph=True, param_shape_backup=backup)
        context.eval_graph.update_groups_of_conv()
        pruned = 1 - float(context.eval_graph.flops()) / flops
        self._restore_shapes(context.eval_graph, backup)
        context.eval_graph.update_groups_of_conv()
        return pruned

    def _apply(self, context, params, ratios):
        """Prune the optimize graph and the scope, then give the eval graph its shapes."""
        model_size = context.eval_graph.numel_params()
        flops = context.eval_graph.flops()
        self._prune_parameters(context.optimize_graph, context.scope, params, ratios,
                               context.place)
        self._prune_graph(context.eval_graph, context.optimize_graph)
        context.optimize_graph.update_groups_of_conv()
        context.eval_graph.update_groups_of_conv()
        context.optimize_graph.compiled_graph = None  # rebuilt for the new shapes
        _logger.info("Pruned size: %.3f; pruned flops: %.3f",
                     1 - float(context.eval_graph.numel_params()) / model_size,
                     1 - float(context.eval_graph.flops()) / flops)


class UniformPruneStrategy(PruneStrategy):
    """One ratio for all of pruned_params, pruning target_ratio of the FLOPs (see the module
    doc); applied at start_epoch. `params` and `ratios` are what it pruned."""

    def _get_best_ratios(self, context):
        params = self._matching_params(context.eval_graph)
        if not params:
            raise ValueError(f"UniformPruneStrategy: no parameter of the eval graph matches "
                             f"pruned_params {self.pruned_params!r}")
        low, high = 0.0, 1.0
        flops = context.eval_graph.flops()
        ratios = []
        while high - low > BISECTION_WIDTH:
            ratio = (low + high) / 2
            ratios = [ratio] * len(params)
            pruned = self._pruned_flops(context, params, ratios, flops)
            if abs(pruned - self.target_ratio) < 1e-2:
                break
            if pruned > self.target_ratio:
                high = ratio
            else:
                low = ratio
        _logger.info("Get ratios: %s", [round(r, 2) for r in ratios])
        return params, ratios

    def restore_from_checkpoint(self, context):
        if getattr(self, "params", None):
            self._apply(context, self.params, self.ratios)

    def on_epoch_begin(self, context):
        if context.epoch_id == self.start_epoch:
            self.params, self.ratios = self._get_best_ratios(context)
            self._apply(context, self.params, self.ratios)


class SensitivePruneStrategy(PruneStrategy):
    """Ratios per parameter from sensitivities (see the module doc); `sensitivities` given
    here are {param: {'pruned_percent': [...], 'loss': [...]}} and join the file's."""

    def __init__(self, pruner=None, start_epoch=0, end_epoch=0, delta_rate=0.20,
                 target_ratio=0.5, metric_name="top1_acc", pruned_params="conv.*_weights",
                 sensitivities_file="./sensitivities.data", sensitivities=None, num_steps=1,
                 eval_rate=None):
        super().__init__(pruner, start_epoch, end_epoch, target_ratio, metric_name,
                         pruned_params)
        self.delta_rate = delta_rate
        self.sensitivities = dict(sensitivities or {})
        self.sensitivities_file = sensitivities_file
        self.num_steps = num_steps
        self.eval_rate = eval_rate
        self.pruning_step = 1 - pow(1 - target_ratio, 1.0 / num_steps)

    def _save_sensitivities(self, sensitivities, sensitivities_file):
        with open(sensitivities_file, "w") as f:
            json.dump(sensitivities, f)

    def _load_sensitivities(self, sensitivities_file):
        found = copy.deepcopy(self.sensitivities)
        if sensitivities_file and os.path.exists(sensitivities_file):
            with open(sensitivities_file) as f:
                found.update(json.load(f))
        for entry in found.values():
            entry["pruned_percent"] = [round(p, 2) for p in entry["pruned_percent"]]
        return found

    def _ratio_grid(self):
        grid, ratio = [], self.delta_rate
        while ratio < 1:
            grid.append(round(ratio, 2))
            ratio += self.delta_rate
        return grid

    def _compute_sensitivities(self, context):
        """The metric's loss with each parameter pruned (lazily: zeroed) by each ratio of the
        grid, its dependants with it; computed ones are skipped, each new one saved."""
        cached_id = np.random.randint(1000)
        path = self.sensitivities_file if self.start_epoch == context.epoch_id else \
            f"{self.sensitivities_file}.epoch{context.epoch_id}"
        sensitivities = self._load_sensitivities(path)
        for param in context.eval_graph.all_parameters():
            if re.match(self.pruned_params, param.name()) and \
                    param.name() not in sensitivities:
                sensitivities[param.name()] = {"pruned_percent": [], "loss": [],
                                               "size": param.shape()[0]}
        metric = None
        for name in list(sensitivities):
            for ratio in self._ratio_grid():
                if ratio in sensitivities[name]["pruned_percent"]:
                    continue
                if metric is None:
                    metric = self._eval_graph(context, self.eval_rate, cached_id)
                backup = {}
                self._prune_parameters(context.eval_graph, context.scope, [name], [ratio],
                                       context.place, lazy=True, param_backup=backup)
                loss = metric - self._eval_graph(context, self.eval_rate, cached_id)
                _logger.info("pruned param: %s; %s; loss=%s", name, ratio, loss)
                for brother in self.pruned_list[0]:
                    if re.match(self.pruned_params, brother):
                        entry = sensitivities.setdefault(
                            brother, {"pruned_percent": [], "loss": []})
                        entry["pruned_percent"].append(ratio)
                        entry["loss"].append(float(loss))
                if path:
                    self._save_sensitivities(sensitivities, path)
                for param_name, value in backup.items():
                    context.scope.find_var(param_name).get_tensor().set(value, context.place)
        return sensitivities

    def _get_best_ratios(self, context, sensitivities, target_ratio):
        """Bisect on a loss level: each parameter's ratio is where its fitted cubic (the
        measured losses, with five zero-loss points at ratio 0) reaches it, until the FLOPs
        pruned are target_ratio (within 0.015)."""
        coefficients, max_loss = {}, 0.0
        for name, entry in sensitivities.items():
            losses = np.array([0.0] * 5 + list(entry["loss"]))
            percents = np.array([0.0] * 5 + list(entry["pruned_percent"]))
            coefficients[name] = np.polyfit(percents, losses, 3)
            max_loss = max(max_loss, float(np.max(losses)))
        flops = context.eval_graph.flops()
        params = list(sensitivities)
        low, ratios = 0.0, []
        while max_loss - low > BISECTION_WIDTH:
            loss = (max_loss + low) / 2
            ratios = [self._ratio_at(coefficients[n], loss, sensitivities[n]) for n in params]
            pruned = self._pruned_flops(context, params, ratios, flops)
            _logger.info("loss level %.4f: ratios %s prune %.4f of the FLOPs", loss,
                         [round(r, 3) for r in ratios], pruned)
            if abs(pruned - target_ratio) < 0.015:
                break
            if pruned > target_ratio:
                max_loss = loss
            else:
                low = loss
        return params, ratios

    @staticmethod
    def _ratio_at(coefficient, loss, entry):
        """The smallest ratio in (0, 1) where the cubic reaches `loss`; where it never does,
        the largest ratio measured."""
        shifted = np.array(coefficient, dtype=float)
        shifted[np.abs(shifted) < 1e-12] = 0.0  # a flat fit (all losses 0) has no roots
        shifted[-1] -= loss
        if not np.any(shifted[:-1]):
            return float(max(entry["pruned_percent"], default=0.0))
        roots = [r.real for r in np.roots(shifted) if abs(r.imag) < 1e-9 and 0 < r.real < 1]
        if roots:
            return float(min(roots))
        return float(max(entry["pruned_percent"], default=0.0))

    def _current_pruning_target(self, context):
        if self.num_steps <= 0:
            return None
        if self.start_epoch == context.epoch_id or context.eval_converged(self.metric_name,
                                                                          0.005):
            self.num_steps -= 1
            return self.pruning_step
        return None

    def on_epoch_begin(self, context):
        ratio = self._current_pruning_target(context)
        if ratio is None:
            return
        sensitivities = self._compute_sensitivities(context)
        params, ratios = self._get_best_ratios(context, sensitivities, ratio)
        self._apply(context, params, ratios)
        _logger.info("Metric after pruning: %.4f", self._eval_graph(context))
