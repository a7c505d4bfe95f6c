"""fluid.evaluator: fluid 1.8's (deprecated) in-program evaluators, ChunkEvaluator and
EditDistance. Each keeps its running totals in persistable variables of the main program:
`reset(exe)` zeroes them (call it before the first batch of a pass, as in fluid), every run of
the main program adds the batch's counts, `eval(exe)` gives the pass's metrics. fluid warns
that they are deprecated in favour of fluid.metrics; so does spmd. DetectionMAP is
fluid.metrics' (the detection_map ops: get_map_var() gives the batch's and the accumulated
mAP, reset(exe) starts a new pass), as an Evaluator.

>>> # evaluator = fluid.evaluator.EditDistance(hyp, ref)   # LoD int64 tokens
>>> # evaluator.reset(exe)
>>> # for batch in reader(): exe.run(main, feed=batch, fetch_list=evaluator.metrics)
>>> # avg_distance, instance_error = evaluator.eval(exe)
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core import Program, Variable, program_guard, unique_name
from ..layers.detection_map_metric import DetectionMAP as _DetectionMAP
from ..layers.helper import LayerHelper
from . import layers

__all__ = ["ChunkEvaluator", "DetectionMAP", "EditDistance"]


def _clone_var(block, var):
    """`var` declared in another program's block, persistable: the same scope value."""
    return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                            lod_level=var.lod_level, persistable=True)


class Evaluator:
    """The base: `states` (persistable totals), `metrics` (this batch's values)."""

    def __init__(self, name: str, **kwargs):
        warnings.warn(
            f"The {type(self).__name__} is deprecated, because maintain a modified program "
            f"inside evaluator cause bug easily, please use fluid.metrics."
            f"{type(self).__name__} instead.", Warning, stacklevel=3)
        self.states: list[Variable] = []
        self.metrics: list[Variable] = []
        self.helper = LayerHelper(name, **kwargs)

    def _check_root_block(self):
        if self.helper.main_program.current_block().idx != 0:
            raise ValueError("You can only invoke Evaluator in root block")

    def reset(self, executor, reset_program=None):
        """Zero every state (runs `reset_program`, a new Program by default)."""
        reset_program = reset_program if reset_program is not None else Program()
        with program_guard(reset_program, Program()):
            for var in self.states:
                g_var = _clone_var(reset_program.current_block(), var)
                layers.fill_constant(shape=g_var.shape, value=0.0, dtype=g_var.dtype,
                                     out=g_var)
        executor.run(reset_program)

    def eval(self, executor, eval_program=None):
        raise NotImplementedError(f"{type(self).__name__} defines eval")

    def _create_state(self, suffix: str, dtype: str, shape):
        state = self.helper.create_global_variable(
            name="_".join([unique_name.generate(self.helper.name), suffix]),
            persistable=True, dtype=dtype, shape=shape)
        self.states.append(state)
        return state

    def _accumulate(self, state, batch_value):
        layers.sums(input=[state, batch_value], out=state)


class ChunkEvaluator(Evaluator):
    """Chunking precision, recall and F1 over a pass (layers.chunk_eval per batch); `metrics`
    are the batch's [precision, recall, f1]."""

    def __init__(self, input, label, chunk_scheme, num_chunk_types, excluded_chunk_types=None):
        super().__init__("chunk_eval")
        self._check_root_block()
        self.num_infer_chunks = self._create_state("num_infer_chunks", "int64", [1])
        self.num_label_chunks = self._create_state("num_label_chunks", "int64", [1])
        self.num_correct_chunks = self._create_state("num_correct_chunks", "int64", [1])
        precision, recall, f1, n_infer, n_label, n_correct = layers.chunk_eval(
            input=input, label=label, chunk_scheme=chunk_scheme,
            num_chunk_types=num_chunk_types, excluded_chunk_types=excluded_chunk_types)
        self._accumulate(self.num_infer_chunks, n_infer)
        self._accumulate(self.num_label_chunks, n_label)
        self._accumulate(self.num_correct_chunks, n_correct)
        self.metrics.extend([precision, recall, f1])

    def eval(self, executor, eval_program=None):
        """(precision, recall, f1) of the pass so far, each a float32 array [1]."""
        eval_program = eval_program if eval_program is not None else Program()
        block = eval_program.current_block()
        infer, label, correct = (float(np.asarray(v).reshape(-1)[0]) for v in executor.run(
            eval_program, fetch_list=[_clone_var(block, s) for s in self.states]))
        precision = correct / infer if infer else 0.0
        recall = correct / label if label else 0.0
        f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
        return (np.array([precision], "float32"), np.array([recall], "float32"),
                np.array([f1], "float32"))


class EditDistance(Evaluator):
    """The average edit distance and the share of sequences with any error, over a pass
    (layers.edit_distance per batch); `metrics` are the batch's [total distance, number of
    sequences with an error]."""

    def __init__(self, input, label, ignored_tokens=None, **kwargs):
        super().__init__("edit_distance", **kwargs)
        self._check_root_block()
        self.total_distance = self._create_state("total_distance", "float32", [1])
        self.seq_num = self._create_state("seq_num", "int64", [1])
        self.instance_error = self._create_state("instance_error", "int64", [1])
        distances, seq_num = layers.edit_distance(input=input, label=label,
                                                  ignored_tokens=ignored_tokens)
        zero = layers.fill_constant(shape=[1], value=0.0, dtype="float32")
        right = layers.reduce_sum(layers.cast(layers.equal(distances, zero), "int64"))
        errors = layers.elementwise_sub(x=seq_num, y=right)
        total = layers.reduce_sum(distances)
        self._accumulate(self.total_distance, total)
        self._accumulate(self.seq_num, seq_num)
        self._accumulate(self.instance_error, errors)
        self.metrics.extend([total, errors])

    def eval(self, executor, eval_program=None):
        """(average distance, instance error rate) of the pass so far, float32 arrays [1]."""
        eval_program = eval_program if eval_program is not None else Program()
        block = eval_program.current_block()
        with program_guard(eval_program, Program()):
            total = _clone_var(block, self.total_distance)
            seq_num = layers.cast(_clone_var(block, self.seq_num), "float32")
            errors = layers.cast(_clone_var(block, self.instance_error), "float32")
            avg_distance = layers.elementwise_div(x=total, y=seq_num)
            avg_error = layers.elementwise_div(x=errors, y=seq_num)
        result = executor.run(eval_program, fetch_list=[avg_distance, avg_error])
        return np.array(result[0]), np.array(result[1])



class DetectionMAP(_DetectionMAP):
    """fluid.metrics.DetectionMAP as fluid 1.8's deprecated evaluator: `states` are the
    accumulated counts, `metrics` the [batch mAP, accumulated mAP]."""

    def __init__(self, input, gt_label, gt_box, gt_difficult=None, class_num=None,
                 background_label=0, overlap_threshold=0.5, evaluate_difficult=True,
                 ap_version="integral"):
        warnings.warn("The DetectionMAP is deprecated, because maintain a modified program "
                      "inside evaluator cause bug easily, please use fluid.metrics."
                      "DetectionMAP instead.", Warning, stacklevel=2)
        super().__init__(input, gt_label, gt_box, gt_difficult, class_num, background_label,
                         overlap_threshold, evaluate_difficult, ap_version)
        self.metrics = [self.cur_map, self.accum_map]
