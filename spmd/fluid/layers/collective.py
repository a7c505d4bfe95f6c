"""fluid.layers.collective: the private collective helpers fluid 1.x programs and tests call
(_allreduce, _broadcast, _c_allreduce, _c_broadcast, _c_allgather, _c_reducescatter,
_c_sync_calc_stream, _c_sync_comm_stream), as ops on spmd's communicator: inside a program run
by several ranks they reduce (sum, max, min or prod), broadcast, gather or scatter across the
ranks.

>>> import spmd.fluid as fluid
>>> from spmd.fluid.layers import collective
>>> with fluid.program_guard(fluid.Program()):
...     x = fluid.data("x", [2], "float32")
...     total = collective._c_allreduce(x)
"""
from __future__ import annotations

from ...core.variable import Variable
from ...errors import InvalidArgumentError
from ...layers.helper import LayerHelper

__all__: list[str] = []  # fluid keeps these private: reached as collective._name


def _check(x, where: str):
    if not isinstance(x, Variable):
        raise InvalidArgumentError(f"{where}: x must be a Variable, got {type(x).__name__}")


_REDUCE_TYPES = ("sum", "max", "min", "prod")


def _reduce_type(reduce_type, where: str) -> str:
    if reduce_type not in _REDUCE_TYPES:
        raise InvalidArgumentError(
            f"{where}: reduce_type must be one of {_REDUCE_TYPES}, got {reduce_type!r}")
    return reduce_type


def _allreduce_op(x, out, reduce_type: str, ring_id: int, use_calc_stream: bool, where: str):
    helper = LayerHelper(where)
    if out is None:
        out = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op(f"c_allreduce_{reduce_type}", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"ring_id": ring_id, "use_calc_stream": use_calc_stream})
    return out


def _allreduce(x, out=None, reduce_type="sum", sync_mode=False):
    """`x` reduced elementwise over every rank with `reduce_type` (sum, max, min or prod),
    into `out` (a new variable when None)."""
    _check(x, "_allreduce")
    return _allreduce_op(x, out, _reduce_type(reduce_type, "_allreduce"), 0, bool(sync_mode),
                         "allreduce")


def _broadcast(x, root, sync_mode=False):
    """Rank `root`'s `x` into every rank's `x`; returns x."""
    return _c_broadcast(x, root=root, use_calc_stream=bool(sync_mode))


def _c_allreduce(x, out=None, reduce_type="sum", ring_id=0, use_calc_stream=False):
    """`x` reduced elementwise with `reduce_type` over every rank of ring `ring_id` (spmd has
    ring 0, the whole job)."""
    _check(x, "_c_allreduce")
    return _allreduce_op(x, out, _reduce_type(reduce_type, "_c_allreduce"), ring_id,
                         use_calc_stream, "c_allreduce")


def _c_broadcast(x, root=0, ring_id=0, use_calc_stream=False):
    """Rank `root`'s `x` into every rank's `x`; returns x."""
    _check(x, "_c_broadcast")
    LayerHelper("c_broadcast").append_op(
        "c_broadcast", inputs={"X": [x]}, outputs={"Out": [x]},
        attrs={"root": root, "ring_id": ring_id, "use_calc_stream": use_calc_stream})
    return x


def _c_sync_comm_stream(x, ring_id):
    """Wait until the collectives issued so far have finished; returns x."""
    _check(x, "_c_sync_comm_stream")
    LayerHelper("c_sync_comm_stream").append_op(
        "c_sync_comm_stream", inputs={"X": [x]}, outputs={"Out": [x]},
        attrs={"ring_id": ring_id})
    return x


def _gather_scatter(op: str, x, nranks, ring_id: int, use_calc_stream: bool):
    _check(x, f"_{op}")
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise InvalidArgumentError(f"_{op}: nranks must be an int >= 1, got {nranks!r}")
    helper = LayerHelper(op)
    out = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    helper.append_op(op, inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"nranks": nranks, "ring_id": ring_id,
                            "use_calc_stream": use_calc_stream})
    return out


def _c_allgather(x, nranks, ring_id=0, use_calc_stream=False):
    """Every rank's `x` stacked along dim 0, in rank order (nranks: the job's size)."""
    return _gather_scatter("c_allgather", x, nranks, ring_id, use_calc_stream)


def _c_reducescatter(x, nranks, ring_id=0, use_calc_stream=False):
    """The sum of `x` over the ranks, each rank keeping its 1/nranks of the rows."""
    return _gather_scatter("c_reducescatter", x, nranks, ring_id, use_calc_stream)


def _c_sync_calc_stream(x):
    """Wait for the computation issued so far (synchronous on spmd's places); returns x."""
    _check(x, "_c_sync_calc_stream")
    LayerHelper("c_sync_calc_stream").append_op(
        "c_sync_calc_stream", inputs={"X": [x]}, outputs={"Out": [x]})
    return x
