"""fluid.log_helper: get_logger, a logger with its own handler that does not propagate (so
it prints once, whatever the root logger's setup).

>>> import logging
>>> from spmd.fluid.log_helper import get_logger
>>> logger = get_logger(__name__, logging.INFO, fmt="%(levelname)s: %(message)s")
"""
from __future__ import annotations

import logging

__all__ = ["get_logger"]


def get_logger(name: str, level, fmt: str | None = None) -> logging.Logger:
    """The logger `name` at `level`, writing to stderr with `fmt` (logging's default format
    when None), not propagating to the root logger, as fluid's."""
    logger = logging.getLogger(name)
    logger.setLevel(level)
    handler = logging.StreamHandler()
    if fmt:
        handler.setFormatter(logging.Formatter(fmt=fmt))
    logger.addHandler(handler)
    logger.propagate = False
    return logger
