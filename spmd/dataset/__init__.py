"""paddle.dataset: the data sets of the PaddlePaddle book, read from Paddle's cache folder.

`import spmd as paddle` then `paddle.dataset.mnist.train()` returns a reader (a function of no
arguments returning an iterator of samples) with Paddle 1.8's sample layout and dtypes. Files
are read from `~/.cache/paddle/dataset/<name>/` (`spmd.dataset.common.DATA_HOME`, which may be
reassigned), where Paddle keeps them; spmd never downloads: a missing file raises
`spmd.errors.PreconditionError` naming the file, the folder, the URL and the md5 Paddle
expects (see spmd.dataset.common).

>>> import spmd as paddle
>>> reader = paddle.batch(paddle.dataset.mnist.train(), batch_size=64)   # doctest: +SKIP
"""
from __future__ import annotations

from . import (
    cifar,
    common,
    conll05,
    imdb,
    imikolov,
    mnist,
    movielens,
    uci_housing,
    wmt14,
    wmt16,
)

__all__ = ["cifar", "common", "conll05", "imdb", "imikolov", "mnist", "movielens",
           "uci_housing", "wmt14", "wmt16"]
