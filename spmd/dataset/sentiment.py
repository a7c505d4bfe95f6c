"""paddle.dataset.sentiment: the NLTK movie_reviews corpus (1000 negative and 1000 positive
reviews) from Paddle's cache folder (DATA_HOME/corpora/movie_reviews.zip, or the folder
DATA_HOME/corpora/movie_reviews/ it unpacks to), read without NLTK.

Words are split as NLTK's corpus reader splits them (runs of word characters, or runs of other
non-space characters, line by line); the dictionary ranks every word by its frequency over the
whole corpus (most frequent first, ties in order of first appearance, the neg files then the
pos files, each sorted by name). Samples are (list of word ids, category: 0 neg, 1 pos), the
neg and pos files interleaved; train() gives the first 1600, test() the other 400. As in fluid,
train() and test() return the samples' iterator itself (not a reader creator).

>>> import spmd as paddle
>>> ids, category = next(paddle.dataset.sentiment.train())   # doctest: +SKIP
"""
from __future__ import annotations

import collections
import os
import re
import zipfile
from itertools import chain

from ..errors import InvalidArgumentError
from . import common

__all__ = ["get_word_dict", "test", "train"]

URL = "https://corpora.bj.bcebos.com/movie_reviews%2Fmovie_reviews.zip"
MD5 = "155de2b77c6834dd8eea7cbe88e93acb"
NUM_TRAINING_INSTANCES = 1600
NUM_TOTAL_INSTANCES = 2000
_WORD = re.compile(r"\w+|[^\w\s]+")  # NLTK's WordPunctTokenizer
_FILE = re.compile(r"^(neg|pos)/(?!\.)[^/]*\.txt$")


class _Corpus:
    """The review files of the corpus: from the unpacked folder when there, else the zip."""

    def __init__(self):
        folder = os.path.join(common.DATA_HOME, "corpora", "movie_reviews")
        if os.path.isdir(folder):
            self.source, self.zip = folder, None
            names = [os.path.relpath(os.path.join(d, f), folder).replace(os.sep, "/")
                     for d, _, files in os.walk(folder) for f in files]
        else:
            path = common.download(URL, "corpora", MD5, save_name="movie_reviews.zip")
            try:
                self.zip = zipfile.ZipFile(path)
            except (zipfile.BadZipFile, OSError) as exc:
                raise InvalidArgumentError(
                    f"cannot read the archive {path}: {exc}; copy the original file again") \
                    from None
            self.source = path
            prefix = "movie_reviews/"
            names = [n[len(prefix):] for n in self.zip.namelist() if n.startswith(prefix)]
        self.fileids = sorted(n for n in names if _FILE.match(n))
        if not self.fileids:
            raise InvalidArgumentError(
                f"{self.source} holds no neg/*.txt or pos/*.txt review files; it is not the "
                "movie_reviews corpus Paddle expects")

    def category(self, name: str) -> list[str]:
        return [f for f in self.fileids if f.startswith(name + "/")]

    def words(self, fileid: str) -> list[str]:
        if self.zip is None:
            with open(os.path.join(self.source, fileid), "rb") as f:
                raw = f.read()
        else:
            raw = self.zip.read("movie_reviews/" + fileid)
        try:
            text = raw.decode("ascii")  # NLTK reads this corpus as ASCII
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"{self.source}: {fileid} is not ASCII text ({exc}); copy the original corpus")\
                from None
        return [w for line in text.splitlines() for w in _WORD.findall(line)]


def _word_dict(corpus: _Corpus) -> list[tuple[str, int]]:
    freq: dict = collections.defaultdict(int)
    for category in ("neg", "pos"):
        for fileid in corpus.category(category):
            for word in corpus.words(fileid):
                freq[word] += 1
    ranked = sorted(freq.items(), key=lambda item: -item[1])  # stable: ties keep first-seen
    return [(word, index) for index, (word, _) in enumerate(ranked)]


def get_word_dict() -> list[tuple[str, int]]:
    """[(word, id)], ids by decreasing frequency over the corpus (see the module docstring).

    >>> import spmd
    >>> words = spmd.dataset.sentiment.get_word_dict()   # doctest: +SKIP
    """
    return _word_dict(_Corpus())


def load_sentiment_data() -> list[tuple[list[int], int]]:
    """Every review as (word ids, category), neg and pos interleaved.

    >>> import spmd
    >>> data = spmd.dataset.sentiment.load_sentiment_data()   # doctest: +SKIP
    """
    corpus = _Corpus()
    words_ids = dict(_word_dict(corpus))
    data = []
    files = chain.from_iterable(zip(corpus.category("neg"), corpus.category("pos")))
    for fileid in files:
        ids = []
        for word in corpus.words(fileid):
            # fluid looks words up lowercased; the corpus is lowercase, so they are there
            if word.lower() not in words_ids:
                raise InvalidArgumentError(
                    f"{corpus.source}: the word {word!r} of {fileid} is in the dictionary only "
                    f"with capitals, and fluid looks words up lowercased; the corpus is not "
                    "the lowercase movie_reviews Paddle expects")
            ids.append(words_ids[word.lower()])
        data.append((ids, 0 if "neg" in fileid else 1))
    return data


def reader_creator(data):
    """The samples of `data` one by one (fluid's name; a generator, not a reader creator)."""
    yield from data


def train():
    """The first 1600 reviews: an iterator of (word ids, category).

    >>> import spmd
    >>> samples = spmd.dataset.sentiment.train()   # doctest: +SKIP
    """
    return reader_creator(load_sentiment_data()[:NUM_TRAINING_INSTANCES])


def test():
    """The reviews after the first 1600: an iterator of (word ids, category).

    >>> import spmd
    >>> samples = spmd.dataset.sentiment.test()   # doctest: +SKIP
    """
    return reader_creator(load_sentiment_data()[NUM_TRAINING_INSTANCES:])


def fetch():
    """Check that the corpus is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.sentiment.fetch()   # doctest: +SKIP
    """
    _Corpus()
