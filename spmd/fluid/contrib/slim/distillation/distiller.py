"""fluid.contrib.slim.distillation.distiller: the distillers, which add a distillation loss
between a student's and a teacher's variables to a merged graph (GraphWrapper) and make
out_nodes['loss'] the student's loss plus it:

- L2Distiller: weight * mean((student - teacher) ** 2), out_node
  'l2loss_<student>_<teacher>';
- FSPDistiller: weight * the sum over the pairs of mean((FSP(student pair) -
  FSP(teacher pair)) ** 2), FSP being fluid's fsp_matrix, out_node 'fsp_distillation_loss';
- SoftLabelDistiller: weight * mean(cross_entropy(softmax(student / T_s),
  softmax(teacher / T_t), soft_label=True)), the teacher's side without gradient, out_node
  'soft_label_loss_<student>_<teacher>'.
"""
from __future__ import annotations

from .... import layers
from ....framework import program_guard

__all__ = ["FSPDistiller", "L2Distiller", "SoftLabelDistiller"]


def _add_loss(graph, distillation_loss, key):
    """out_nodes['loss'] = distillation_loss (+ the graph's loss so far); out_nodes[key] =
    distillation_loss."""
    loss = distillation_loss
    if "loss" in graph.out_nodes:
        loss = distillation_loss + graph.var(graph.out_nodes["loss"]).var
    graph.out_nodes["loss"] = loss.name
    graph.out_nodes[key] = distillation_loss.name
    return graph


class L2Distiller:
    """An L2 loss between `student_feature_map` and `teacher_feature_map` (variable names of
    equal shapes), weighted by distillation_loss_weight."""

    def __init__(self, student_feature_map, teacher_feature_map, distillation_loss_weight=1):
        self.student_feature_map = student_feature_map
        self.teacher_feature_map = teacher_feature_map
        self.distillation_loss_weight = distillation_loss_weight

    def distiller_loss(self, graph):
        """Add the loss to `graph` (in place) and return it."""
        with program_guard(graph.program):
            student = graph.var(self.student_feature_map).var
            teacher = graph.var(self.teacher_feature_map).var
            l2 = layers.reduce_mean(layers.square(student - teacher))
            weighted = l2 * self.distillation_loss_weight
            return _add_loss(graph, weighted, f"l2loss_{self.student_feature_map}_"
                                              f"{self.teacher_feature_map}")


class FSPDistiller:
    """FSP losses: student_pairs[i] and teacher_pairs[i] are (start, end) variable names of
    sections with equal feature-map sizes (and equal channels across student and teacher)."""

    def __init__(self, student_pairs, teacher_pairs, distillation_loss_weight=1):
        if len(student_pairs) != len(teacher_pairs):
            raise ValueError(f"FSPDistiller: {len(student_pairs)} student pairs, "
                             f"{len(teacher_pairs)} teacher pairs; they go one to one")
        self.student_pairs = student_pairs
        self.teacher_pairs = teacher_pairs
        self.distillation_loss_weight = distillation_loss_weight

    def distiller_loss(self, graph):
        """Add the loss to `graph` (in place) and return it."""
        with program_guard(graph.program):
            losses = []
            for s_pair, t_pair in zip(self.student_pairs, self.teacher_pairs):
                s_fsp = layers.fsp_matrix(graph.var(s_pair[0]).var, graph.var(s_pair[1]).var)
                t_fsp = layers.fsp_matrix(graph.var(t_pair[0]).var, graph.var(t_pair[1]).var)
                losses.append(layers.reduce_mean(layers.square(s_fsp - t_fsp)))
            weighted = layers.sum(losses) * self.distillation_loss_weight
            return _add_loss(graph, weighted, "fsp_distillation_loss")


class SoftLabelDistiller:
    """A soft-label cross entropy of the student's softmax(logits / student_temperature)
    against the teacher's softmax(logits / teacher_temperature)."""

    def __init__(self, student_feature_map=None, teacher_feature_map=None,
                 student_temperature=1.0, teacher_temperature=1.0, distillation_loss_weight=1):
        self.student_feature_map = student_feature_map
        self.teacher_feature_map = teacher_feature_map
        self.student_temperature = student_temperature
        self.teacher_temperature = teacher_temperature
        self.distillation_loss_weight = distillation_loss_weight

    def distiller_loss(self, graph):
        """Add the loss to `graph` (in place) and return it."""
        with program_guard(graph.program):
            student = graph.var(self.student_feature_map).var
            teacher = graph.var(self.teacher_feature_map).var
            s_prob = layers.softmax(student / self.student_temperature)
            t_prob = layers.softmax(teacher / self.teacher_temperature)
            t_prob.stop_gradient = True
            ce = layers.reduce_mean(layers.cross_entropy(s_prob, t_prob, soft_label=True))
            weighted = ce * self.distillation_loss_weight
            return _add_loss(graph, weighted, f"soft_label_loss_{self.student_feature_map}_"
                                              f"{self.teacher_feature_map}")
