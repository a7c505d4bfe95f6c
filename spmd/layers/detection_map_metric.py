"""fluid.metrics.DetectionMAP (fluid 1.8's metrics.py): the mAP of the current batch and the
mAP accumulated over the batches since the last reset, both by the detection_map op (the
accumulated one carries its state in persistable variables: positive counts per class and
the (score, flag) lists of true and false positives, plus a has_state flag that reset() sets
back to 0).

>>> # m = DetectionMAP(nmsed, gt_label, gt_box, gt_difficult, class_num=21)
>>> # cur_map, accum_map = m.get_map_var()   # fetch both each batch; m.reset(exe) per pass
"""
from __future__ import annotations

from ..core import unique_name
from ..core.program import Program, program_guard
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from .detection_ssd import detection_map
from .helper import LayerHelper
from .initializer import ConstantInitializer
from .tensor import cast, concat, fill_constant

__all__ = ["DetectionMAP"]


class DetectionMAP:
    """Mean average precision of LoD detections [No, 6] against LoD ground truth (labels,
    boxes and optionally difficult flags), per batch and accumulated.

    >>> # evaluator = DetectionMAP(nmsed_out, gt_label, gt_box, difficult, class_num=4,
    >>> #                          overlap_threshold=0.5, ap_version="11point")
    """

    def __init__(self, input, gt_label, gt_box, gt_difficult=None, class_num=None,
                 background_label=0, overlap_threshold=0.5, evaluate_difficult=True,
                 ap_version="integral"):
        if not isinstance(class_num, int) or class_num <= 0:
            raise InvalidArgumentError(
                f"DetectionMAP: class_num must be a positive int (background included), got "
                f"{class_num!r}")
        for arg, value in (("input", input), ("gt_label", gt_label), ("gt_box", gt_box)):
            if not isinstance(value, Variable):
                raise InvalidArgumentError(
                    f"DetectionMAP: {arg} must be a Variable, got {type(value).__name__}")
        self.helper = LayerHelper("map_eval")
        parts = [cast(gt_label, gt_box.dtype)]
        if gt_difficult is not None:
            parts.append(cast(gt_difficult, gt_box.dtype))
        label = concat(parts + [gt_box], axis=1)
        options = dict(overlap_threshold=overlap_threshold,
                       evaluate_difficult=evaluate_difficult, ap_version=ap_version)
        self.cur_map = detection_map(input, label, class_num, background_label, **options)
        # fluid leaves the three states uninitialized (the op reads them only once has_state
        # is 1, after it wrote them); spmd's plan wants every persistable it reads to hold a
        # value, so the startup program gives them zeros first
        states = [self._state("accum_pos_count", "int32", [class_num, 1]),
                  self._state("accum_true_pos", "float32", [1, 2], lod_level=1),
                  self._state("accum_false_pos", "float32", [1, 2], lod_level=1)]
        self.has_state = self._state("has_state", "int32", [1])
        self.accum_map = detection_map(input, label, class_num, background_label,
                                       has_state=self.has_state, input_states=states,
                                       out_states=states, **options)
        fill_constant(shape=[1], dtype="int32", value=1, out=self.has_state)

    def _state(self, suffix, dtype, initial_shape, lod_level=0):
        """A persistable state variable, zeros of `initial_shape` after the startup program."""
        name = "_".join([unique_name.generate(self.helper.name), suffix])
        var = self.helper.create_variable(name=name, dtype=dtype, persistable=True,
                                          lod_level=lod_level)
        start = self.helper.startup_program.global_block().create_var(
            name=name, shape=initial_shape, dtype=dtype, persistable=True)
        ConstantInitializer(0)(start, self.helper.startup_program.global_block())
        return var

    def get_map_var(self):
        """(this batch's mAP, the mAP accumulated since the last reset)."""
        return self.cur_map, self.accum_map

    def reset(self, executor, reset_program=None):
        """Start accumulating afresh: has_state back to 0 (run in `reset_program`)."""
        program = reset_program if reset_program is not None else Program()
        with program_guard(program):
            var = program.current_block().create_var(
                name=self.has_state.name, shape=[1], dtype="int32", persistable=True)
            fill_constant(shape=[1], dtype="int32", value=0, out=var)
        executor.run(program)
