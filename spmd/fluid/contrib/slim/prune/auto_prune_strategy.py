"""fluid.contrib.slim.prune.auto_prune_strategy: AutoPruneStrategy, a search over per-parameter
pruning ratios (tokens: ratio / 0.01) by a controller (an SAController): each search step
prunes by the current tokens, trains retrain_epoch epochs (0: none), takes the metric as the
reward and asks the controller for the next tokens, which must prune between min_ratio and
max_ratio of the eval graph's FLOPs; the parameters are restored between steps."""
from __future__ import annotations

import copy
import functools
import logging
import re

from ....log_helper import get_logger
from .prune_strategy import BISECTION_WIDTH, PruneStrategy

__all__ = ["AutoPruneStrategy"]

_logger = get_logger(__name__, logging.INFO, fmt="%(asctime)s-%(levelname)s: %(message)s")


class AutoPruneStrategy(PruneStrategy):
    """See the module doc. `uniform_range`: the token range of every position (None: the
    initial tokens'); `init_tokens`: where the search starts (None: the uniform ratio that
    prunes the middle of [min_ratio, max_ratio])."""

    def __init__(self, pruner=None, controller=None, start_epoch=0, end_epoch=10,
                 min_ratio=0.5, max_ratio=0.7, metric_name="top1_acc",
                 pruned_params="conv.*_weights", retrain_epoch=0, uniform_range=None,
                 init_tokens=None):
        super().__init__(pruner, start_epoch, end_epoch, 0.0, metric_name, pruned_params)
        self._max_ratio = max_ratio
        self._min_ratio = min_ratio
        self._controller = controller
        self._metric_name = metric_name
        self._pruned_param_names = []
        self._retrain_epoch = retrain_epoch
        self._uniform_range = uniform_range
        self._init_tokens = init_tokens
        self._current_tokens = None
        self._param_backup = {}
        self._param_shape_backup = {}

    @property
    def current_tokens(self):
        """The tokens (ratio / 0.01 per pruned parameter) being tried."""
        return self._current_tokens

    @property
    def pruned_param_names(self):
        return list(self._pruned_param_names)

    def on_compression_begin(self, context):
        if self._controller is None:
            raise ValueError("AutoPruneStrategy needs a controller (an SAController)")
        self._pruned_param_names = [p.name() for p in context.eval_graph.all_parameters()
                                    if re.match(self.pruned_params, p.name())]
        if not self._pruned_param_names:
            raise ValueError(f"AutoPruneStrategy: no parameter matches pruned_params "
                             f"{self.pruned_params!r}")
        self._current_tokens = list(self._init_tokens) if self._init_tokens is not None \
            else self._get_init_tokens(context)
        if self._uniform_range is not None:
            self._range_table = [round(self._uniform_range, 2) / 0.01] * len(
                self._pruned_param_names)
        else:
            self._range_table = copy.deepcopy(self._current_tokens)
        _logger.info("init tokens: %s; range table: %s", self._current_tokens,
                     self._range_table)
        self._controller.reset(self._range_table, self._current_tokens,
                               functools.partial(self._constrain_func, context=context))

    def _constrain_func(self, tokens, context=None):
        """Whether `tokens` prune between min_ratio and max_ratio of the FLOPs."""
        pruned = self._pruned_flops(context, self._pruned_param_names,
                                    self._tokens_to_ratios(tokens), context.eval_graph.flops())
        ok = self._min_ratio <= pruned <= self._max_ratio
        _logger.info("%s try %s; flops: -%s", "Success" if ok else "Failed", tokens, pruned)
        return ok

    def _get_init_tokens(self, context):
        return self._ratios_to_tokens(self._get_uniform_ratios(context))

    def _ratios_to_tokens(self, ratios):
        return [int(r / 0.01) for r in ratios]

    def _tokens_to_ratios(self, tokens):
        return [t * 0.01 for t in tokens]

    def _get_uniform_ratios(self, context):
        """The uniform ratio (bisection) pruning the middle of [min_ratio, max_ratio]."""
        low, high = 0.0, 1.0
        target = (self._min_ratio + self._max_ratio) / 2
        flops = context.eval_graph.flops()
        ratios = []
        while high - low > BISECTION_WIDTH:
            ratio = (low + high) / 2
            ratios = [ratio] * len(self._pruned_param_names)
            pruned = self._pruned_flops(context, self._pruned_param_names, ratios, flops)
            if abs(pruned - target) < 1e-2:
                break
            if pruned > target:
                high = ratio
            else:
                low = ratio
        return ratios

    def _searching(self, epoch_id, end):
        if self._retrain_epoch == 0:
            return self.start_epoch <= epoch_id <= end
        return self.start_epoch <= epoch_id <= end and \
            (epoch_id - self.start_epoch) % self._retrain_epoch == 0

    def on_epoch_begin(self, context):
        if not self._searching(context.epoch_id, self.end_epoch):
            return
        self._param_shape_backup, self._param_backup = {}, {}
        self._prune_parameters(context.optimize_graph, context.scope,
                               self._pruned_param_names,
                               self._tokens_to_ratios(self._current_tokens), context.place,
                               param_backup=self._param_backup,
                               param_shape_backup=self._param_shape_backup)
        self._prune_graph(context.eval_graph, context.optimize_graph)
        context.optimize_graph.update_groups_of_conv()
        context.eval_graph.update_groups_of_conv()
        context.optimize_graph.compiled_graph = None
        context.skip_training = self._retrain_epoch == 0

    def _restore(self, context):
        for name, value in self._param_backup.items():
            context.scope.find_var(name).get_tensor().set(value, context.place)
        self._restore_shapes(context.optimize_graph, self._param_shape_backup)
        self._prune_graph(context.eval_graph, context.optimize_graph)
        self._param_backup, self._param_shape_backup = {}, {}
        context.optimize_graph.update_groups_of_conv()
        context.eval_graph.update_groups_of_conv()
        context.optimize_graph.compiled_graph = None

    def on_epoch_end(self, context):
        ends_step = self._retrain_epoch == 0 or \
            (context.epoch_id - self.start_epoch + 1) % self._retrain_epoch == 0
        if self.start_epoch <= context.epoch_id < self.end_epoch and ends_step:
            reward = context.eval_results[self._metric_name][-1]
            self._controller.update(self._current_tokens, reward)
            self._current_tokens = self._controller.next_tokens()
            self._restore(context)
        elif context.epoch_id == self.end_epoch:
            self._restore(context)
