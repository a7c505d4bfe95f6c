"""scikit-learn's bundled 8x8 digits (1797 images, no download), split and scaled the same way
everywhere: 1437 training and 360 test images, pixels scaled to [0, 1]."""
from __future__ import annotations

import numpy as np


def load_digits_split(seed: int = 0, dtype="float32"):
    """Return (x_train, y_train, x_test, y_test); x is [N, 64], y is int64 [N, 1]."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(dtype)
    y = digits.target.astype("int64").reshape(-1, 1)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = 1437
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def batches(x, y, batch_size: int, epoch: int, seed: int = 0):
    """Shuffled mini-batches for one epoch; the same (seed, epoch) gives the same batches."""
    order = np.random.default_rng(seed * 1000 + epoch).permutation(len(x))
    for start in range(0, len(x) - batch_size + 1, batch_size):
        idx = order[start:start + batch_size]
        yield x[idx], y[idx]
