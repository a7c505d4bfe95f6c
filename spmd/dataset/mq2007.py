"""paddle.dataset.mq2007: the LETOR 4.0 MQ2007 learning-to-rank set (Fold1) from Paddle's cache
folder: the text files of the RAR archive DATA_HOME/MQ2007/<name>.rar unpacked beside it, where
fluid unpacks them and reads DATA_HOME/MQ2007/MQ2007/MQ2007/Fold1/train.txt and test.txt.

Each line is `relevance qid:<id> 1:<f1> ... 46:<f46> # comment`; lines of another shape are
skipped, as in fluid. Lines are grouped into queries (consecutive lines of one qid), queries
whose relevances are all 0 are dropped, and each query's documents are ranked by relevance
(stable). `format` picks the samples: "pairwise" (default): (array([1]), better doc, worse
doc) for every pair of documents of different relevance; "pointwise": (relevance, features) of
the query's top document; "listwise": (relevances N x 1, features N x 46); "plain_txt": (qid,
relevance, features) of the top document. Features are float64 arrays. As in fluid, train()
and test() return the samples' iterator itself (not a reader creator).

Python's standard library cannot unpack RAR: with the archive but not the text files, spmd
unpacks it with the `rarfile` package when that is installed (as fluid does; it needs the unrar
tool), else the error gives the command to run.

>>> import spmd as paddle
>>> label, left, right = next(paddle.dataset.mq2007.train())   # doctest: +SKIP
"""
from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from ..errors import InvalidArgumentError, PreconditionError
from . import common

__all__ = ["Query", "QueryList", "fetch", "gen_list", "gen_pair", "gen_plain_txt", "gen_point",
           "load_from_text", "query_filter", "test", "train"]

URL = ("http://www.bigdatalab.ac.cn/benchmark/upload/download_source/"
       "7b6dbbe2-842c-11e4-a536-bcaec51b9163_MQ2007.rar")
MD5 = "7be1640ae95c6408dab0ae7207bdc706"
FEATURES = 46


class Query:
    """One query-document line: query_id, relevance_score, feature_vector, description."""

    def __init__(self, query_id=-1, relevance_score=-1, feature_vector=None, description=""):
        self.query_id = query_id
        self.relevance_score = relevance_score
        self.feature_vector = [] if feature_vector is None else feature_vector
        self.description = description

    def __str__(self):
        features = " ".join(str(f) for f in self.feature_vector)
        return f"{self.relevance_score} {self.query_id} {features}"

    def _parse_(self, text: str):
        """Fill from one line of the data file; None when the line has another shape."""
        comment = text.find("#")
        # as fluid: without a '#', the line's last character is cut (its newline)
        line = text[:comment].strip()
        self.description = text[comment + 1:].strip()
        parts = line.split()
        if len(parts) != FEATURES + 2:
            return None
        self.relevance_score = int(parts[0])
        self.query_id = int(parts[1].split(":")[1])
        self.feature_vector.extend(float(p.split(":")[1]) for p in parts[2:])
        return self


class QueryList:
    """The documents of one query (all the same query_id)."""

    def __init__(self, querylist=None):
        self.query_id = -1
        self.querylist = [] if querylist is None else querylist
        for query in self.querylist:
            self._check(query)

    def _check(self, query):
        if self.query_id == -1:
            self.query_id = query.query_id
        elif self.query_id != query.query_id:
            raise ValueError("query in list must be same query_id")

    def __iter__(self):
        return iter(self.querylist)

    def __len__(self):
        return len(self.querylist)

    def __getitem__(self, i):
        return self.querylist[i]

    def _correct_ranking_(self):
        self.querylist.sort(key=lambda q: q.relevance_score, reverse=True)

    def _add_query(self, query):
        self._check(query)
        self.querylist.append(query)


def _ranked(querylist) -> QueryList:
    if not isinstance(querylist, QueryList):
        querylist = QueryList(querylist)
    querylist._correct_ranking_()
    return querylist


def gen_plain_txt(querylist):
    """(query_id, relevance, features) per document, best first."""
    querylist = _ranked(querylist)
    for query in querylist:
        yield querylist.query_id, query.relevance_score, np.array(query.feature_vector)


def gen_point(querylist):
    """(relevance, features) per document, best first."""
    for query in _ranked(querylist):
        yield query.relevance_score, np.array(query.feature_vector)


def gen_pair(querylist, partial_order: str = "full"):
    """(array([1]), better features, worse features) for each pair of different relevance."""
    querylist = _ranked(querylist)
    for i, left in enumerate(querylist):
        for right in querylist.querylist[i + 1:]:
            if left.relevance_score > right.relevance_score:
                yield np.array([1]), np.array(left.feature_vector), np.array(right.feature_vector)
            elif left.relevance_score < right.relevance_score:
                yield np.array([1]), np.array(right.feature_vector), np.array(left.feature_vector)


def gen_list(querylist):
    """(relevances N x 1, features N x 46) of the whole query, best first."""
    querylist = _ranked(querylist)
    yield (np.array([[q.relevance_score] for q in querylist]),
           np.array([q.feature_vector for q in querylist]))


def query_filter(querylists):
    """The queries with at least one relevant document."""
    return [ql for ql in querylists if sum(q.relevance_score for q in ql) != 0]


def _text_file(filepath: str) -> str:
    folder = os.path.join(common.DATA_HOME, "MQ2007")
    path = os.path.join(folder, filepath)
    if os.path.isfile(path):
        return path
    archive = common.download(URL, "MQ2007", MD5)  # a clear error when the archive is missing
    try:
        import rarfile
    except ImportError:
        rarfile = None
    if rarfile is not None:
        try:
            with rarfile.RarFile(archive) as rar:
                rar.extractall(path=folder)
        except Exception as exc:  # noqa: BLE001 - rarfile's errors name the missing unrar tool
            raise PreconditionError(f"cannot unpack {archive} with rarfile: {exc}") from None
        if os.path.isfile(path):
            return path
    raise PreconditionError(
        f"paddle.dataset.mq2007: {path} is missing. It is in the RAR archive {archive}, and "
        "Python's standard library cannot unpack RAR (fluid uses the rarfile package and the "
        f"unrar tool). Unpack it once: cd {folder} && unrar x {os.path.basename(archive)} "
        "(or 7z x), or pip install rarfile with unrar installed")


def load_from_text(filepath: str, shuffle: bool = False, fill_missing: int = -1):
    """The QueryLists of DATA_HOME/MQ2007/<filepath>, in file order."""
    path = _text_file(filepath)
    querylists, current, skipped = [], None, 0
    with open(path) as f:
        for line in f:
            query = Query()._parse_(line)
            if query is None:
                skipped += 1
                continue
            if current is None or query.query_id != current.query_id:
                current = QueryList()
                querylists.append(current)
            current._add_query(query)
    if skipped:
        warnings.warn(f"paddle.dataset.mq2007: skipped {skipped} line(s) of {path} without "
                      f"{FEATURES + 2} space-separated fields", stacklevel=2)
    return querylists


_FORMATS = {"plain_txt": gen_plain_txt, "pointwise": gen_point, "listwise": gen_list}


def _reader(filepath: str, format: str = "pairwise", shuffle: bool = False,  # noqa: A002
            fill_missing: int = -1):
    if format not in _FORMATS and format != "pairwise":
        raise InvalidArgumentError(
            f"paddle.dataset.mq2007: format must be one of 'pairwise', 'pointwise', "
            f"'listwise', 'plain_txt', got {format!r}")
    for querylist in query_filter(load_from_text(filepath, shuffle, fill_missing)):
        if format == "pairwise":
            yield from gen_pair(querylist)
        else:
            yield next(_FORMATS[format](querylist))


train = functools.partial(_reader, filepath="MQ2007/MQ2007/Fold1/train.txt")
test = functools.partial(_reader, filepath="MQ2007/MQ2007/Fold1/test.txt")


def fetch() -> str:
    """The archive's path in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.mq2007.fetch()   # doctest: +SKIP
    """
    return common.download(URL, "MQ2007", MD5)
