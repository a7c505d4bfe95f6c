"""fluid.incubate.fleet.base.mode: fleet's implementation ids."""

__all__ = ["Mode"]


class Mode:
    """>>> Mode.COLLECTIVE
    3
    """

    TRANSPILER = 1
    PSLIB = 2
    COLLECTIVE = 3
