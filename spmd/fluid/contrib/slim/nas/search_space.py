"""fluid.contrib.slim.nas.search_space: SearchSpace, the interface a light-NAS search space
implements (init_tokens, range_table, create_net, get_model_latency).

>>> class Widths(SearchSpace):
...     def init_tokens(self): return [0]
...     def range_table(self): return [3]
...     def create_net(self, tokens): return None
...     def get_model_latency(self, program): return 0.0
>>> Widths().range_table()
[3]
"""
from __future__ import annotations

import abc

__all__ = ["SearchSpace"]


class SearchSpace(abc.ABC):
    @abc.abstractmethod
    def init_tokens(self):
        """The tokens the search starts from."""

    @abc.abstractmethod
    def range_table(self):
        """How many values each token position takes."""

    @abc.abstractmethod
    def create_net(self, tokens):
        """The programs (startup, train, test, ...) of the network `tokens` describe."""

    @abc.abstractmethod
    def get_model_latency(self, program):
        """The latency of `program` (the search's constraint)."""
