"""paddle.dataset.imikolov: the Penn Treebank text of Mikolov's simple-examples, from Paddle's
cache folder (DATA_HOME/imikolov/imikolov%2Fsimple-examples.tgz).

Words are read as Paddle reads them, as `bytes`, while the marks '<s>', '<e>' and '<unk>' are
str keys of the dictionary. `build_dict` ranks the words of ptb.train.txt and ptb.valid.txt
seen more than `min_word_freq` times by (descending count, word); '<unk>' gets the last id.
Readers yield, per line, with data_type NGRAM every window of `n` ids of '<s>' line '<e>' (a
tuple), or with SEQ a pair ([<s>] + line ids, line ids + [<e>]) skipped when longer than `n`
(n > 0).

>>> import spmd as paddle
>>> word_dict = paddle.dataset.imikolov.build_dict()                  # doctest: +SKIP
>>> next(paddle.dataset.imikolov.train(word_dict, 5)())              # doctest: +SKIP
(3, 12, 45, 7, 2)
"""
from __future__ import annotations

import collections

from ..errors import InvalidArgumentError
from . import common

__all__ = ["DataType", "build_dict", "test", "train"]

URL = "https://dataset.bj.bcebos.com/imikolov%2Fsimple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
_TRAIN = "./simple-examples/data/ptb.train.txt"
_VALID = "./simple-examples/data/ptb.valid.txt"


class DataType:
    """What a reader yields: NGRAM windows of n word ids, or SEQ (source, target) pairs.

    >>> DataType.NGRAM, DataType.SEQ
    (1, 2)
    """

    NGRAM = 1
    SEQ = 2


def _lines(tar, name: str, path: str):
    # the archive's members are named "./simple-examples/..."; accept a re-packed one without "./"
    names = set(tar.getnames())
    found = name if name in names else name[2:]
    return common.tar_member(tar, found, path)


def word_count(f, word_freq=None):
    """Add the words of the lines of `f` (and one '<s>' and '<e>' per line) to `word_freq`.

    >>> counts = word_count([b" a b a \\n"])
    >>> counts[b"a"], counts["<s>"]
    (2, 1)
    """
    if word_freq is None:
        word_freq = collections.defaultdict(int)
    for line in f:
        for word in line.strip().split():
            word_freq[word] += 1
        word_freq["<s>"] += 1
        word_freq["<e>"] += 1
    return word_freq


def _order(item):
    word = item[0]
    # words are bytes, the marks str: compare both as bytes, the order Paddle's sort gives
    return -item[1], word.encode() if isinstance(word, str) else word


def build_dict(min_word_freq: int = 50) -> dict:
    """Word -> id for the words of the train and valid texts seen more than `min_word_freq`
    times, and '<unk>' -> the next id.

    >>> import spmd
    >>> d = spmd.dataset.imikolov.build_dict(min_word_freq=50)   # doctest: +SKIP
    """
    path = common.download(URL, "imikolov", MD5)
    with common.open_tar(path) as tar:
        word_freq = word_count(_lines(tar, _VALID, path),
                               word_count(_lines(tar, _TRAIN, path)))
    word_freq.pop("<unk>", None)  # the text's own <unk> gets the last id, below
    kept = sorted(((w, n) for w, n in word_freq.items() if n > min_word_freq), key=_order)
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def _samples(line: bytes, word_idx: dict, n: int, data_type: int):
    unk = word_idx["<unk>"]
    if data_type == DataType.NGRAM:
        words = ["<s>", *line.strip().split(), "<e>"]
        if len(words) >= n:
            ids = [word_idx.get(w, unk) for w in words]
            for i in range(n, len(ids) + 1):
                yield tuple(ids[i - n:i])
    else:
        ids = [word_idx.get(w, unk) for w in line.strip().split()]
        source = [word_idx["<s>"], *ids]
        if n > 0 and len(source) > n:
            return
        yield source, [*ids, word_idx["<e>"]]


def reader_creator(filename: str, word_idx: dict, n: int, data_type: int):
    """A reader over one text of the archive (`filename` its member name).

    >>> reader = reader_creator(_TRAIN, {"<unk>": 0}, 3, DataType.NGRAM)   # doctest: +SKIP
    """
    if data_type not in (DataType.NGRAM, DataType.SEQ):
        raise InvalidArgumentError(f"imikolov: data_type must be DataType.NGRAM (1) or "
                                   f"DataType.SEQ (2), got {data_type!r}")
    if data_type == DataType.NGRAM and n <= -1:
        raise InvalidArgumentError(f"imikolov: the n-gram length n must be >= 0, got {n}")

    def reader():
        path = common.download(URL, "imikolov", MD5)
        with common.open_tar(path) as tar:
            for line in _lines(tar, filename, path):
                yield from _samples(line, word_idx, n, data_type)

    return reader


def train(word_idx: dict, n: int, data_type: int = DataType.NGRAM):
    """The training text (ptb.train.txt): n-gram tuples, or (source, target) id lists with
    data_type=DataType.SEQ (n then the longest source kept; n <= 0 keeps all).

    >>> import spmd
    >>> d = spmd.dataset.imikolov.build_dict()                       # doctest: +SKIP
    >>> reader = spmd.dataset.imikolov.train(d, 5)                   # doctest: +SKIP
    """
    return reader_creator(_TRAIN, word_idx, n, data_type)


def test(word_idx: dict, n: int, data_type: int = DataType.NGRAM):
    """The test text (ptb.valid.txt, as in Paddle), same samples as `train`.

    >>> import spmd
    >>> d = spmd.dataset.imikolov.build_dict()                       # doctest: +SKIP
    >>> reader = spmd.dataset.imikolov.test(d, 5)                    # doctest: +SKIP
    """
    return reader_creator(_VALID, word_idx, n, data_type)


def fetch():
    """Check that the simple-examples archive is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.imikolov.fetch()   # doctest: +SKIP
    """
    common.download(URL, "imikolov", MD5)
