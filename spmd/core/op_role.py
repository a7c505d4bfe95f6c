"""OpRole: what an op is for (forward, backward, optimize, ...), the enum passes select ops by.

Its own module, below operator.py and the modules operator.py builds on (fluid_compat.py,
pruning.py), which all read roles.
"""
from __future__ import annotations

import enum

__all__ = ["OpRole"]


class OpRole(enum.Enum):
    """What an op is for; passes select ops by role, never by parsing names."""

    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZE = "optimize"
    COMMUNICATE = "communicate"
    LOSS = "loss"  # the op seeding loss@GRAD: the data-parallel scale pass rewrites it
    # fluid's LRSched: a learning-rate schedule and its step counter. Run every training step
    # on every rank; not differentiated; dropped by clone(for_test=True), as in fluid
    LR_SCHED = "lr_sched"
    # the updates EMA and ModelAverage append: on every rank (never sharded by Reduce mode, as
    # optimizer updates are); dropped by clone(for_test=True), as fluid drops them
    AVERAGE = "average"
