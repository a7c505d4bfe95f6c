"""paddle.dataset.mnist: the MNIST digits from Paddle's cache folder (DATA_HOME/mnist).

Each sample is (image, label): image a float32 array of the 28*28 = 784 pixels scaled to
[-1, 1] (x / 255 * 2 - 1), label an int in [0, 9]. Files: the four idx files, gzipped, as
Paddle downloads them (see `common.download` for what happens when one is missing).

>>> import spmd as paddle
>>> reader = paddle.dataset.mnist.train()          # doctest: +SKIP
>>> image, label = next(reader())                  # doctest: +SKIP
>>> image.shape, image.dtype, label                # doctest: +SKIP
((784,), dtype('float32'), 5)
"""
from __future__ import annotations

import gzip
import struct

import numpy as np

from ..errors import InvalidArgumentError
from . import common

__all__ = ["test", "train"]

URL_PREFIX = "https://dataset.bj.bcebos.com/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_IMAGE_MD5 = "9fb629c4189551a2d022fa330f9573f3"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TEST_LABEL_MD5 = "ec29112dd5afa0611ce80d1b7f02629c"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_IMAGE_MD5 = "f68b3c2dcbeaaa9fbdd348bbdeb94873"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"
TRAIN_LABEL_MD5 = "d53e105ee54ea40749a09fcbcd1e9432"

_IMAGE_MAGIC = 2051
_LABEL_MAGIC = 2049


def _read_gz(path: str) -> bytes:
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as exc:
        raise InvalidArgumentError(
            f"cannot read the gzip file {path}: {exc}; the copy is damaged: copy the original "
            "file again") from exc


def _parse(image_path: str, label_path: str) -> tuple[np.ndarray, np.ndarray]:
    images, labels = _read_gz(image_path), _read_gz(label_path)
    magic, count, rows, cols = struct.unpack_from(">IIII", images, 0)
    lab_magic, lab_count = struct.unpack_from(">II", labels, 0)
    if magic != _IMAGE_MAGIC or lab_magic != _LABEL_MAGIC:
        raise InvalidArgumentError(
            f"{image_path} / {label_path}: not MNIST idx files (magic numbers {magic}, "
            f"{lab_magic}; expected {_IMAGE_MAGIC}, {_LABEL_MAGIC})")
    if lab_count != count or len(images) < 16 + count * rows * cols or len(labels) < 8 + count:
        raise InvalidArgumentError(
            f"{image_path} / {label_path}: {count} images of {rows}x{cols} and {lab_count} "
            "labels announced, but the files are shorter or the counts differ; copy the "
            "original files again")
    pixels = np.frombuffer(images, np.uint8, count * rows * cols, 16).reshape(count, rows * cols)
    return pixels, np.frombuffer(labels, np.uint8, count, 8)


def reader_creator(image_filename: str, label_filename: str, buffer_size: int = 100):
    """A reader over one pair of gzipped idx files (images, labels).

    `buffer_size` is how many images are converted at a time, as in Paddle; it does not
    change the samples.

    >>> reader = reader_creator("train-images-idx3-ubyte.gz",
    ...                         "train-labels-idx1-ubyte.gz")   # doctest: +SKIP
    """
    def reader():
        pixels, labels = _parse(image_filename, label_filename)
        for start in range(0, len(labels), buffer_size):
            # float32 all the way, in Paddle's order of operations, for the same bits
            block = pixels[start:start + buffer_size].astype(np.float32)
            block = block / 255.0
            block = block * 2.0
            block = block - 1.0
            for i, label in enumerate(labels[start:start + buffer_size]):
                yield block[i, :], int(label)

    return reader


def train():
    """MNIST training set: a reader of (float32[784] in [-1, 1], int label) samples.

    >>> import spmd
    >>> reader = spmd.dataset.mnist.train()   # doctest: +SKIP
    """
    return reader_creator(common.download(TRAIN_IMAGE_URL, "mnist", TRAIN_IMAGE_MD5),
                          common.download(TRAIN_LABEL_URL, "mnist", TRAIN_LABEL_MD5), 100)


def test():
    """MNIST test set: a reader of (float32[784] in [-1, 1], int label) samples.

    >>> import spmd
    >>> reader = spmd.dataset.mnist.test()    # doctest: +SKIP
    """
    return reader_creator(common.download(TEST_IMAGE_URL, "mnist", TEST_IMAGE_MD5),
                          common.download(TEST_LABEL_URL, "mnist", TEST_LABEL_MD5), 100)


def fetch():
    """Check that all four MNIST files are in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.mnist.fetch()   # doctest: +SKIP
    """
    common.download(TRAIN_IMAGE_URL, "mnist", TRAIN_IMAGE_MD5)
    common.download(TRAIN_LABEL_URL, "mnist", TRAIN_LABEL_MD5)
    common.download(TEST_IMAGE_URL, "mnist", TEST_IMAGE_MD5)
    common.download(TEST_LABEL_URL, "mnist", TEST_LABEL_MD5)
