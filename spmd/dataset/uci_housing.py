"""paddle.dataset.uci_housing: the Boston housing prices from Paddle's cache folder
(DATA_HOME/uci_housing/housing.data, whitespace-separated, 14 columns per row).

Each sample is (features, price): features a float64 array of the 13 features, each
normalised as (x - mean) / (max - min) over the whole file, and price a float64 array of one
value. The first 80% of the rows are the training set, the rest the test set, in file order.
Unlike Paddle, loading draws no feature-range plot into ./image (that needed matplotlib).

>>> import spmd as paddle
>>> features, price = next(paddle.dataset.uci_housing.train()())   # doctest: +SKIP
>>> features.shape, price.shape                                     # doctest: +SKIP
((13,), (1,))
"""
from __future__ import annotations

import os
import tarfile
import tempfile

import numpy as np

from ..errors import InvalidArgumentError
from . import common

__all__ = ["feature_names", "fluid_model", "predict_reader", "test", "train"]

URL = "http://paddlemodels.bj.bcebos.com/uci_housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX",
                 "PTRATIO", "B", "LSTAT"]
FLUID_URL_MODEL = ("https://github.com/PaddlePaddle/book/raw/develop/01.fit_a_line/fluid/"
                   "fit_a_line.fluid.tar")
FLUID_MD5_MODEL = "6e6dd637ccd5993961f68bfbde46090b"

# (path, size, mtime) -> (train rows, test rows): train() and test() share one parse
_LOADED: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def load_data(filename: str, feature_num: int = 14, ratio: float = 0.8):
    """Parse and normalise the housing file; returns (train rows, test rows), each row the 13
    normalised features followed by the price.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "housing.data")
    >>> _ = open(path, "w").write(" ".join(str(float(v)) for v in range(28)))
    >>> train_rows, test_rows = load_data(path)
    >>> train_rows.shape, test_rows.shape
    ((1, 14), (1, 14))
    """
    stat = os.stat(filename)
    key = (filename, stat.st_size, stat.st_mtime_ns, feature_num, ratio)
    if key in _LOADED:
        return _LOADED[key]
    with open(filename, "rb") as f:
        tokens = f.read().split()
    try:
        values = np.array([float(t) for t in tokens], dtype=np.float64)
    except ValueError as exc:
        raise InvalidArgumentError(f"{filename}: not whitespace-separated numbers ({exc}); "
                                   "copy the original housing.data again") from exc
    if values.size == 0 or values.size % feature_num:
        raise InvalidArgumentError(
            f"{filename}: {values.size} numbers, expected a multiple of {feature_num} "
            "(rows of 13 features and a price); copy the original housing.data again")
    data = values.reshape(values.size // feature_num, feature_num)
    maximums, minimums = data.max(axis=0), data.min(axis=0)
    avgs = data.sum(axis=0) / data.shape[0]
    for i in range(feature_num - 1):
        data[:, i] = (data[:, i] - avgs[i]) / (maximums[i] - minimums[i])
    offset = int(data.shape[0] * ratio)
    _LOADED[key] = (data[:offset], data[offset:])
    return _LOADED[key]


def _reader(rows: np.ndarray):
    def reader():
        for row in rows:
            yield row[:-1], row[-1:]

    return reader


def train():
    """UCI housing training set: (float64[13] normalised features, float64[1] price).

    >>> import spmd
    >>> reader = spmd.dataset.uci_housing.train()   # doctest: +SKIP
    """
    return _reader(load_data(common.download(URL, "uci_housing", MD5))[0])


def test():
    """UCI housing test set: (float64[13] normalised features, float64[1] price).

    >>> import spmd
    >>> reader = spmd.dataset.uci_housing.test()    # doctest: +SKIP
    """
    return _reader(load_data(common.download(URL, "uci_housing", MD5))[1])


def predict_reader():
    """The first test sample's features, as a 1-tuple (what the book feeds for inference).

    >>> import spmd
    >>> (features,) = spmd.dataset.uci_housing.predict_reader()   # doctest: +SKIP
    """
    return (load_data(common.download(URL, "uci_housing", MD5))[1][0][:-1],)


def fluid_model():
    """Unpack the book's trained fit_a_line model (DATA_HOME/uci_housing/fit_a_line.fluid.tar)
    into a new temporary folder and return that folder.

    >>> import spmd
    >>> model_dir = spmd.dataset.uci_housing.fluid_model()   # doctest: +SKIP
    """
    path = common.download(FLUID_URL_MODEL, "uci_housing", FLUID_MD5_MODEL,
                           "fit_a_line.fluid.tar")
    folder = tempfile.mkdtemp()
    with common.open_tar(path) as tar:
        for member in tar.getmembers():
            # a member may not write outside the folder it is unpacked into
            target = os.path.realpath(os.path.join(folder, member.name))
            if not target.startswith(os.path.realpath(folder) + os.sep) or member.issym() \
                    or member.islnk():
                raise InvalidArgumentError(f"{path}: member {member.name!r} would be written "
                                           "outside the model folder; refusing to unpack it")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)
    return folder


def fetch():
    """Check that housing.data is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.uci_housing.fetch()   # doctest: +SKIP
    """
    common.download(URL, "uci_housing", MD5)
