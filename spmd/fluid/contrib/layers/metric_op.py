"""fluid.contrib.layers.metric_op: ctr_metric_bundle(input, label), PaddleRec's running CTR
statistics: persistable totals, over every batch run so far, of the squared and absolute
errors of `input` against `label`, the predictions, their sigmoids (q), the positives and the
instances, as fluid 1.8 accumulates them (zeroed by the startup program).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     p = fluid.data("p", [None, 1], "float32")
...     y = fluid.data("y", [None, 1], "float32")
...     sqrerr, abserr, prob, q, pos, ins = ctr_metric_bundle(p, y)
>>> sqrerr.persistable
True
"""
from __future__ import annotations

from .... import layers as L
from ....errors import InvalidArgumentError

__all__ = ["ctr_metric_bundle"]

MISSING: list[str] = []


def _total():
    return L.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True,
                               force_cpu=True)


def _add_to(total, batch_value):
    L.sums([total, L.reshape(batch_value, [1])], out=total)


def ctr_metric_bundle(input, label):
    """(sqrerr, abserr, prob, q, pos_num, ins_num), each a persistable float32 [1] total."""
    if tuple(input.shape) != tuple(label.shape):
        raise InvalidArgumentError(f"ctr_metric_bundle: input {list(input.shape)} and label "
                                   f"{list(label.shape)} must have the same shape")
    sqrerr, abserr, prob, q, pos_num, ins_num = (_total() for _ in range(6))
    diff = L.elementwise_sub(input, label)
    _add_to(sqrerr, L.reduce_sum(L.square(diff)))
    _add_to(abserr, L.reduce_sum(L.abs(diff)))
    _add_to(prob, L.reduce_sum(input))
    _add_to(q, L.reduce_sum(L.sigmoid(input)))
    _add_to(pos_num, L.reduce_sum(label))
    ones = L.fill_constant_batch_size_like(label, [-1, 1], "float32", 1.0)
    _add_to(ins_num, L.reduce_sum(ones))
    return sqrerr, abserr, prob, q, pos_num, ins_num
