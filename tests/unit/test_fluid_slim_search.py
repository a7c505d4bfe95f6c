"""fluid.contrib.slim's searcher (SAController's annealing over tokens, with a constraint),
nas.lock's file lock and nas.search_space's interface."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from spmd.fluid.contrib.slim.nas import SearchSpace
from spmd.fluid.contrib.slim.nas.lock import lock, unlock
from spmd.fluid.contrib.slim.searcher import EvolutionaryController, SAController


def test_annealing_finds_the_best_tokens_within_the_constraint():
    np.random.seed(1)
    target = [3, 1, 4]
    sa = SAController(range_table=[5, 5, 5], reduce_rate=0.9, init_temperature=5,
                      max_iter_number=50)
    sa.reset([5, 5, 5], [0, 0, 0], constrain_func=lambda t: t[0] != 2)
    tokens = sa.next_tokens()
    for _ in range(400):
        reward = 12 - sum(abs(a - b) for a, b in zip(tokens, target))
        sa.update(tokens, reward)
        tokens = sa.next_tokens()
        assert tokens[0] != 2 and all(0 <= t < 5 for t in tokens)
    assert sa.best_tokens == target and sa.max_reward == 12


def test_interfaces_are_abstract():
    with pytest.raises(TypeError):
        EvolutionaryController()
    with pytest.raises(TypeError):
        SearchSpace()


def test_lock_excludes_another_holder(tmp_path):
    path = tmp_path / "state"
    path.write_text("")
    order = []
    with open(path) as first, open(path) as second:
        lock(first)

        def other():
            lock(second)
            order.append("second")
            unlock(second)

        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.2)
        order.append("first")
        unlock(first)
        t.join(5)
    assert order == ["first", "second"]


def test_structure_pruner_equals_fluid():
    from spmd.fluid.contrib.slim.prune import Pruner, StructurePruner

    p = StructurePruner({"*": 1}, {"*": "l1_norm"})
    w = np.arange(24, dtype="float32").reshape(2, 3, 4) * np.array([1, -3, 0.5, 2])
    idx = p.cal_pruned_idx("w", w, 0.5)
    # fluid 1.8.5's StructurePruner on the same input (run once by hand in PaddlePaddle 1.8.5)
    assert idx.tolist() == [0, 1]
    assert p.prune_tensor(w, idx, 2).tolist() == [
        [[1.0, 6.0], [3.0, 14.0], [5.0, 22.0]], [[7.0, 30.0], [9.0, 38.0], [11.0, 46.0]]]
    lazy = p.prune_tensor(w, idx, 2, lazy=True)
    assert lazy.shape == w.shape and (lazy[..., :2] == 0).all()
    assert (lazy[..., 2:] == w[..., 2:]).all()
    assert Pruner().prune(w) is w
    with pytest.raises(ValueError, match="l1_norm"):
        StructurePruner({"*": 0}, {"*": "l2"}).cal_pruned_idx("w", w, 0.5)
