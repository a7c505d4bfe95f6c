"""paddle.dataset: the data sets of the PaddlePaddle book, read from Paddle's cache folder.

`import spmd as paddle` then `paddle.dataset.mnist.train()` returns a reader (a function of no
arguments returning an iterator of samples) with Paddle 1.8's sample layout and dtypes. Files
are read from `~/.cache/paddle/dataset/<name>/` (`spmd.dataset.common.DATA_HOME`, which may be
reassigned), where Paddle keeps them; spmd never downloads: a missing file raises
`spmd.errors.PreconditionError` naming the file, the folder, the URL and the md5 Paddle
expects (see spmd.dataset.common). Images (flowers, voc2012, spmd.dataset.image) decode with
OpenCV or Pillow when installed; without them only PNG is decoded (a JPEG raises an error
naming what to install).

>>> import spmd as paddle
>>> reader = paddle.batch(paddle.dataset.mnist.train(), batch_size=64)   # doctest: +SKIP
"""
from __future__ import annotations

from . import (
    cifar,
    common,
    conll05,
    flowers,
    image,
    imdb,
    imikolov,
    mnist,
    movielens,
    mq2007,
    sentiment,
    uci_housing,
    voc2012,
    wmt14,
    wmt16,
)

__all__ = ["cifar", "common", "conll05", "flowers", "image", "imdb", "imikolov", "mnist",
           "movielens", "mq2007", "sentiment", "uci_housing", "voc2012", "wmt14", "wmt16"]
