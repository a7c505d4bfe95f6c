"""paddle.dataset.imdb: the IMDB movie reviews (aclImdb) from Paddle's cache folder
(DATA_HOME/imdb/imdb%2FaclImdb_v1.tar.gz).

A review is tokenised as Paddle does it: the file's bytes with trailing newlines removed, ASCII
punctuation deleted, lower-cased and split on whitespace, so words are `bytes`. The word
dictionary maps each word seen more than `cutoff` times to its rank by (descending count,
word), plus '<unk>' (a str key, as in Paddle) for the rest. Each sample is (word ids, label):
a list of ints and 0 for a positive review, 1 for a negative one; all positive reviews come
first, each group in archive order.

>>> import spmd as paddle
>>> word_dict = paddle.dataset.imdb.word_dict()                        # doctest: +SKIP
>>> ids, label = next(paddle.dataset.imdb.train(word_dict)())          # doctest: +SKIP
"""
from __future__ import annotations

import collections
import re
import string

from . import common

__all__ = ["build_dict", "test", "train", "word_dict"]

URL = "https://dataset.bj.bcebos.com/imdb%2FaclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"

_PUNCTUATION = string.punctuation.encode()


def tokenize(pattern):
    """Yield the token list (bytes words) of every archive member whose name matches the
    compiled regular expression `pattern`, in archive order.

    >>> import re
    >>> docs = tokenize(re.compile(r"aclImdb/train/pos/.*\\.txt$"))   # doctest: +SKIP
    """
    path = common.download(URL, "imdb", MD5)
    with common.open_tar(path) as tar:
        # members in order, one pass: the archive is gzipped, so random access re-reads it
        for member in tar:
            if member.isfile() and pattern.match(member.name):
                text = tar.extractfile(member).read().rstrip(b"\n\r")
                yield text.translate(None, _PUNCTUATION).lower().split()


def _ranked(word_freq: dict, cutoff: int) -> dict:
    kept = [(w, n) for w, n in word_freq.items() if n > cutoff]
    kept.sort(key=lambda item: (-item[1], item[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def build_dict(pattern, cutoff: int) -> dict:
    """Word -> id for the words of the matching reviews seen more than `cutoff` times, ranked
    by (descending count, word), and '<unk>' -> the next id.

    >>> import re
    >>> d = build_dict(re.compile(r"aclImdb/train/.*\\.txt$"), 10)   # doctest: +SKIP
    """
    word_freq: dict = collections.defaultdict(int)
    for doc in tokenize(pattern):
        for word in doc:
            word_freq[word] += 1
    return _ranked(word_freq, cutoff)


def reader_creator(pos_pattern, neg_pattern, word_idx: dict):
    """Read the matching reviews now (positive ones labelled 0, then negative ones labelled 1)
    and return a reader over them.

    >>> import re
    >>> reader = reader_creator(re.compile("aclImdb/train/pos/.*"),
    ...                         re.compile("aclImdb/train/neg/.*"), {"<unk>": 0})  # doctest: +SKIP
    """
    unk = word_idx["<unk>"]
    samples = []
    for pattern, label in ((pos_pattern, 0), (neg_pattern, 1)):
        for doc in tokenize(pattern):
            samples.append(([word_idx.get(w, unk) for w in doc], label))

    def reader():
        yield from samples

    return reader


def train(word_idx: dict):
    """IMDB training set: (list of word ids, label 0 positive / 1 negative) samples.

    >>> import spmd
    >>> reader = spmd.dataset.imdb.train(spmd.dataset.imdb.word_dict())   # doctest: +SKIP
    """
    return reader_creator(re.compile(r"aclImdb/train/pos/.*\.txt$"),
                          re.compile(r"aclImdb/train/neg/.*\.txt$"), word_idx)


def test(word_idx: dict):
    """IMDB test set: (list of word ids, label 0 positive / 1 negative) samples.

    >>> import spmd
    >>> reader = spmd.dataset.imdb.test(spmd.dataset.imdb.word_dict())    # doctest: +SKIP
    """
    return reader_creator(re.compile(r"aclImdb/test/pos/.*\.txt$"),
                          re.compile(r"aclImdb/test/neg/.*\.txt$"), word_idx)


def word_dict() -> dict:
    """The book's dictionary: words seen more than 150 times in all train and test reviews.

    >>> import spmd
    >>> d = spmd.dataset.imdb.word_dict()   # doctest: +SKIP
    """
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


def fetch():
    """Check that the IMDB archive is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.imdb.fetch()   # doctest: +SKIP
    """
    common.download(URL, "imdb", MD5)
