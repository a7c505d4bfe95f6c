"""Models and data for the data-parallel tests: the same script on every rank, shards cut from
one global batch by rank and size."""
from __future__ import annotations

import hashlib

import numpy as np

import spmd.fluid as fluid

GLOBAL_BATCH = 24  # divisible by 1, 2, 3 and 4 ranks, times 2 places per rank


def optimizer(name: str):
    clip = fluid.clip.GradientClipByGlobalNorm(clip_norm=0.5)
    decay = fluid.regularizer.L2Decay(1e-3)
    if name == "sgd":
        return fluid.optimizer.SGD(0.1, regularization=decay, grad_clip=clip)
    if name == "momentum":
        return fluid.optimizer.Momentum(0.05, momentum=0.9, use_nesterov=True,
                                        regularization=decay, grad_clip=clip)
    return fluid.optimizer.Adam(0.01, regularization=decay, grad_clip=clip)


def build(model: str, opt: str, dtype: str):
    """(main, startup, loss) for an MLP or a CNN without batch_norm, on 8x8 inputs."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 64], dtype)
        y = fluid.data("y", [None, 1], "int64")
        if model == "mlp":
            h = fluid.layers.fc(x, 32, act="relu")
            h = fluid.layers.fc(h, 16, act="tanh")
        else:
            h = fluid.layers.reshape(x, [-1, 1, 8, 8])
            h = fluid.layers.conv2d(h, num_filters=4, filter_size=3, padding=1, act="relu")
            h = fluid.layers.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
            h = fluid.layers.conv2d(h, num_filters=6, filter_size=3, act="relu")
        logits = fluid.layers.fc(h, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        optimizer(opt).minimize(loss)
    return main, startup, loss


def batches(dtype: str, steps: int):
    rng = np.random.default_rng(42)
    return [(rng.standard_normal((GLOBAL_BATCH, 64)).astype(dtype),
             rng.integers(0, 10, size=(GLOBAL_BATCH, 1)).astype("int64")) for _ in range(steps)]


def shard(array, rank: int, size: int):
    per = len(array) // size
    return array[rank * per:(rank + 1) * per]


def params(scope, program) -> dict:
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in program.all_parameters()}


def digest(vals: dict) -> np.ndarray:
    """A hash of the arrays by name: what ranks compare to hold bitwise the same values."""
    h = hashlib.sha256()
    for name in sorted(vals):
        h.update(name.encode() + np.ascontiguousarray(vals[name]).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


def same_on_every_rank(vals: dict):
    from spmd.comm.mpi import MPICommunicator

    everyone = MPICommunicator().allgather(digest(vals))
    assert (everyone == everyone[0]).all(), "ranks hold different parameters"
