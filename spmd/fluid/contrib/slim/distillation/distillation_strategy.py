"""fluid.contrib.slim.distillation.distillation_strategy: DistillationStrategy. From
start_epoch it trains the student merged with the (frozen) teacher, on the student's loss plus
the distillers' losses, with the context's distiller_optimizer; after end_epoch - 1 the
optimize graph it replaced comes back (for fine-tuning or the next strategy)."""
from __future__ import annotations

import logging

from ....executor import Executor
from ....framework import Program, Variable, program_guard
from ....log_helper import get_logger
from ..core.strategy import Strategy

__all__ = ["DistillationStrategy"]

_logger = get_logger(__name__, logging.INFO, fmt="%(asctime)s-%(levelname)s: %(message)s")


class DistillationStrategy(Strategy):
    """`distillers`: the distillers whose losses are added (L2Distiller, FSPDistiller,
    SoftLabelDistiller)."""

    def __init__(self, distillers=None, start_epoch=0, end_epoch=0):
        super().__init__(start_epoch, end_epoch)
        self.distillers = distillers

    def restore_from_checkpoint(self, context):
        if 0 < context.epoch_id and self.start_epoch < context.epoch_id < self.end_epoch:
            self._create_distillation_graph(context)

    def on_epoch_begin(self, context):
        if context.epoch_id == self.start_epoch:
            self._create_distillation_graph(context)

    def _create_distillation_graph(self, context):
        """Merge the first teacher into a clone of the train graph, add the distillers'
        losses, append the distiller optimizer's ops (its state initialized in the context's
        scope), and make it the optimize graph."""
        if not context.teacher_graphs:
            raise ValueError("DistillationStrategy needs a teacher: give the Compressor "
                             "teacher_programs")
        if context.distiller_optimizer is None:
            raise ValueError("DistillationStrategy needs the Compressor's "
                             "distiller_optimizer")
        teacher = context.teacher_graphs[0]
        for var in teacher.program.list_vars():
            var.stop_gradient = True
        graph = context.train_graph.clone()
        graph.merge(teacher)
        if "loss" in graph.out_nodes:
            graph.out_nodes["student_loss"] = graph.out_nodes["loss"]
        for distiller in self.distillers or []:
            graph = distiller.distiller_loss(graph)
        startup = Program()
        optimizer = context.distiller_optimizer
        with program_guard(graph.program, startup):
            optimizer._name = "distillation_optimizer"
            if isinstance(optimizer._learning_rate, Variable):
                optimizer._learning_rate_map[graph.program] = optimizer._learning_rate
            optimizer.minimize(graph.var(graph.out_nodes["loss"]).var)
        Executor(context.place).run(startup, scope=context.scope)
        context.put("distillation_backup_optimize_graph", context.optimize_graph)
        context.optimize_graph = graph
        _logger.info("DistillationStrategy: training the distillation graph")

    def on_epoch_end(self, context):
        if context.epoch_id == self.end_epoch - 1:
            context.optimize_graph = context.get("distillation_backup_optimize_graph")
            _logger.info("DistillationStrategy: back to the optimize graph")
