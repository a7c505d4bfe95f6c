"""fluid.contrib.reader: distributed_batch_reader (its module distributed_reader, as in fluid)."""
from . import distributed_reader
from .distributed_reader import distributed_batch_reader

__all__ = ["distributed_batch_reader", "distributed_reader"]
