"""paddle.dataset.cifar: CIFAR-10 and CIFAR-100 from Paddle's cache folder (DATA_HOME/cifar).

Each sample is (image, label): image a float32 array of the 3*32*32 = 3072 values (channel
major, as in the batches) scaled to [0, 1], label an int. The files are the python-version
archives (cifar-10-python.tar.gz, cifar-100-python.tar.gz), whose batches are Python pickles:
they are loaded by a restricted unpickler that accepts only plain containers, bytes/str,
numbers and numpy arrays, and refuses anything else with an error.

>>> import spmd as paddle
>>> image, label = next(paddle.dataset.cifar.train10()())   # doctest: +SKIP
>>> image.shape, image.dtype                                 # doctest: +SKIP
((3072,), dtype('float32'))
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from . import common
from ._restricted_pickle import restricted_load

__all__ = ["test10", "test100", "train10", "train100"]

URL_PREFIX = "https://dataset.bj.bcebos.com/cifar/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"


def _field(batch, name: str, source: str, fallback: str | None = None):
    # the archives were pickled by Python 2: keys come back as bytes; accept str keys too
    for key in (name, fallback):
        if key is None:
            continue
        for spelled in (key.encode(), key):
            if isinstance(batch, dict) and spelled in batch:
                return batch[spelled]
    keys = list(batch) if isinstance(batch, dict) else type(batch).__name__
    raise InvalidArgumentError(
        f"the CIFAR batch {source} has no {name!r} entry (it has {keys}); the archive is not "
        "the python version of CIFAR that Paddle reads: copy the original file")


def _batch_samples(batch, source: str):
    data = _field(batch, "data", source)
    labels = _field(batch, "labels", source, fallback="fine_labels")
    for sample, label in zip(data, labels):
        yield (sample / 255.0).astype(np.float32), int(label)


def reader_creator(filename: str, sub_name: str, cycle: bool = False):
    """A reader over the batches of a CIFAR archive whose member names contain `sub_name`,
    in archive order; with `cycle=True` it starts over at the end, forever.

    >>> reader = reader_creator("cifar-10-python.tar.gz", "data_batch")  # doctest: +SKIP
    """
    def reader():
        while True:
            with common.open_tar(filename) as tar:
                names = [m.name for m in tar if m.isfile() and sub_name in m.name]
                for name in names:
                    source = f"{filename}:{name}"
                    batch = restricted_load(tar.extractfile(name), source, encoding="bytes")
                    yield from _batch_samples(batch, source)
            if not cycle:
                break

    return reader


def train100():
    """CIFAR-100 training set: (float32[3072] in [0, 1], fine label in [0, 99]) samples.

    >>> import spmd
    >>> reader = spmd.dataset.cifar.train100()   # doctest: +SKIP
    """
    return reader_creator(common.download(CIFAR100_URL, "cifar", CIFAR100_MD5), "train")


def test100():
    """CIFAR-100 test set: (float32[3072] in [0, 1], fine label in [0, 99]) samples.

    >>> import spmd
    >>> reader = spmd.dataset.cifar.test100()    # doctest: +SKIP
    """
    return reader_creator(common.download(CIFAR100_URL, "cifar", CIFAR100_MD5), "test")


def train10(cycle: bool = False):
    """CIFAR-10 training set: (float32[3072] in [0, 1], label in [0, 9]) samples; with
    `cycle=True` the reader never ends.

    >>> import spmd
    >>> reader = spmd.dataset.cifar.train10()    # doctest: +SKIP
    """
    return reader_creator(common.download(CIFAR10_URL, "cifar", CIFAR10_MD5), "data_batch",
                          cycle=cycle)


def test10(cycle: bool = False):
    """CIFAR-10 test set: (float32[3072] in [0, 1], label in [0, 9]) samples.

    >>> import spmd
    >>> reader = spmd.dataset.cifar.test10()     # doctest: +SKIP
    """
    return reader_creator(common.download(CIFAR10_URL, "cifar", CIFAR10_MD5), "test_batch",
                          cycle=cycle)


def fetch():
    """Check that both CIFAR archives are in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.cifar.fetch()   # doctest: +SKIP
    """
    common.download(CIFAR10_URL, "cifar", CIFAR10_MD5)
    common.download(CIFAR100_URL, "cifar", CIFAR100_MD5)
