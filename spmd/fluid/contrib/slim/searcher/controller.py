"""fluid.contrib.slim.searcher.controller: the token searchers of slim's light NAS:
EvolutionaryController (the interface) and SAController, simulated annealing over tokens
(one int per position, position i in range(range_table[i])).

>>> import numpy as np
>>> np.random.seed(0)
>>> sa = SAController(range_table=[4, 4], init_temperature=10)
>>> sa.reset([4, 4], [0, 0])
>>> tokens = sa.next_tokens()
>>> sa.update(tokens, reward=1.0)
>>> sa.best_tokens == tokens and 0 <= min(tokens) and max(tokens) < 4
True
"""
from __future__ import annotations

import abc
import logging
import math

import numpy as np

__all__ = ["EvolutionaryController", "SAController"]

_logger = logging.getLogger(__name__)


class EvolutionaryController(abc.ABC):
    """A searcher: reset(range_table, ...), next_tokens(), update(tokens, reward)."""

    @abc.abstractmethod
    def update(self, tokens, reward):
        """Take the reward the tokens earned."""

    @abc.abstractmethod
    def reset(self, range_table, constrain_func=None):
        """Start a search over `range_table`."""

    @abc.abstractmethod
    def next_tokens(self):
        """The tokens to try next."""


class SAController(EvolutionaryController):
    """Simulated annealing: a worse reward is accepted with probability
    exp((reward - current) / T), T = init_temperature * reduce_rate ** iteration; a
    constrain_func(tokens) -> bool limits the neighbours tried (max_iter_number times)."""

    def __init__(self, range_table=None, reduce_rate=0.85, init_temperature=1024,
                 max_iter_number=300):
        self._range_table = range_table
        self._reduce_rate = reduce_rate
        self._init_temperature = init_temperature
        self._max_iter_number = max_iter_number
        self._reward = -1
        self._tokens = None
        self._max_reward = -1
        self._best_tokens = None
        self._iter = 0
        self._constrain_func = None

    @property
    def best_tokens(self):
        return self._best_tokens

    @property
    def max_reward(self):
        return self._max_reward

    @property
    def current_tokens(self):
        return self._tokens

    @property
    def iteration(self):
        """How many updates (rewards) it has taken since reset."""
        return self._iter

    def reset(self, range_table, init_tokens=None, constrain_func=None):
        self._range_table = range_table
        self._constrain_func = constrain_func
        self._tokens = init_tokens
        self._iter = 0

    def update(self, tokens, reward):
        self._iter += 1
        temperature = self._init_temperature * self._reduce_rate ** self._iter
        if reward > self._reward or np.random.random() <= math.exp(
                (reward - self._reward) / temperature):
            self._reward, self._tokens = reward, tokens
        if reward > self._max_reward:
            self._max_reward, self._best_tokens = reward, tokens
        _logger.info("iter: %d; max_reward: %s; best_tokens: %s", self._iter,
                     self._max_reward, self._best_tokens)

    def next_tokens(self, control_token=None):
        tokens = list(control_token) if control_token else list(self._tokens)
        new = tokens[:]
        index = int(len(self._range_table) * np.random.random())
        new[index] = (new[index] + np.random.randint(self._range_table[index] - 1) + 1) % (
            self._range_table[index]) if self._range_table[index] > 1 else 0
        if self._constrain_func is None:
            return new
        for _ in range(self._max_iter_number):
            if self._constrain_func(new):
                break
            index = int(len(self._range_table) * np.random.random())
            new = tokens[:]
            new[index] = np.random.randint(self._range_table[index])
        return new
