"""paddle.dataset.conll05: the CoNLL-2005 semantic role labelling test set (the public part,
which the book trains on) and its dictionaries, from Paddle's cache folder (DATA_HOME/conll05st:
conll05st-tests.tar.gz, conll05st%2FwordDict.txt, conll05st%2FverbDict.txt,
conll05st%2FtargetDict.txt, conll05st%2Femb).

Each sample is nine lists of ints, one entry per word of a sentence, for one predicate of it:
word ids, the ids of the words at predicate -2, -1, 0, +1, +2 ('bos'/'eos' past the ends)
repeated, the predicate id repeated, the 0/1 mark of that 5-word window, and the BIO label ids.
Unknown words get id 0 (UNK_IDX). Paddle numbers the labels in the iteration order of a Python
set, which differs from one process to the next; spmd numbers them in the order the tags first
appear in targetDict.txt (B-tag, I-tag per tag, then "O" last, as Paddle), the same on every
rank and in every run.

>>> import spmd as paddle
>>> word_dict, verb_dict, label_dict = paddle.dataset.conll05.get_dict()   # doctest: +SKIP
>>> sample = next(paddle.dataset.conll05.test()())                         # doctest: +SKIP
>>> len(sample)                                                            # doctest: +SKIP
9
"""
from __future__ import annotations

import gzip

from ..errors import InvalidArgumentError
from . import common

__all__ = ["get_dict", "get_embedding", "test"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/conll05st/conll05st-tests.tar.gz"
DATA_MD5 = "387719152ae52d60422c016e92a742fc"
WORDDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FwordDict.txt"
WORDDICT_MD5 = "ea7fb7d4c75cc6254716f0177a506baa"
VERBDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FverbDict.txt"
VERBDICT_MD5 = "0d2977293bbb6cbefab5b0f97db1e77c"
TRGDICT_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2FtargetDict.txt"
TRGDICT_MD5 = "d8c7f03ceb5fc2e5a0fa7503a4353751"
EMB_URL = "http://paddlemodels.bj.bcebos.com/conll05st%2Femb"
EMB_MD5 = "bf436eb0faa1f6f9103017f8be57cdb7"
UNK_IDX = 0

_WORDS = "conll05st-release/test.wsj/words/test.wsj.words.gz"
_PROPS = "conll05st-release/test.wsj/props/test.wsj.props.gz"


def load_label_dict(filename: str) -> dict:
    """BIO label -> id from a target dictionary file: B-tag, I-tag for every tag of its B-/I-
    lines in order of first appearance, then "O".

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("B-A0\\nI-A0\\nB-V\\nI-V\\nO\\n")
    >>> load_label_dict(f.name)
    {'B-A0': 0, 'I-A0': 1, 'B-V': 2, 'I-V': 3, 'O': 4}
    """
    tags: dict = {}
    with open(filename, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith(("B-", "I-")):
                tags.setdefault(line[2:], None)
    labels = {}
    for tag in tags:
        labels["B-" + tag] = len(labels)
        labels["I-" + tag] = len(labels)
    labels["O"] = len(labels)
    return labels


def load_dict(filename: str) -> dict:
    """Line (stripped) -> line number, for a one-entry-per-line dictionary file.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("the\\ncat\\n")
    >>> load_dict(f.name)
    {'the': 0, 'cat': 1}
    """
    with open(filename, encoding="utf-8") as f:
        return {line.strip(): i for i, line in enumerate(f)}


def _bio(column: list[str], where: str) -> list[str]:
    # one predicate's bracketed column, e.g. (A0* * *) (V*) *, as BIO labels
    tag, inside, out = "O", False, []
    for mark in column:
        if mark == "*":
            out.append("I-" + tag if inside else "O")
        elif mark == "*)":
            out.append("I-" + tag)
            inside = False
        elif "(" in mark:
            tag = mark[1:mark.find("*")]
            out.append("B-" + tag)
            inside = ")" not in mark
        else:
            raise InvalidArgumentError(f"{where}: unexpected label {mark!r} in the props file")
    return out


def _sentence_samples(words: list[str], rows: list[list[str]], where: str):
    columns = [[row[i] for row in rows] for i in range(len(rows[0]))]
    verbs = [v for v in columns[0] if v != "-"]
    for i, column in enumerate(columns[1:]):
        yield words, verbs[i], _bio(column, where)


def corpus_reader(data_path: str, words_name: str, props_name: str):
    """A reader of (sentence words, predicate, BIO labels), one per predicate of a sentence,
    from the gzipped words and props members of the archive.

    >>> reader = corpus_reader(path, _WORDS, _PROPS)   # doctest: +SKIP
    """
    def reader():
        with common.open_tar(data_path) as tar:
            words_gz = common.tar_member(tar, words_name, data_path)
            props_gz = common.tar_member(tar, props_name, data_path)
            with gzip.GzipFile(fileobj=words_gz) as wf, gzip.GzipFile(fileobj=props_gz) as pf:
                words, rows = [], []
                for word, props in zip(wf, pf):
                    labels = props.decode().split()
                    if labels:
                        words.append(word.decode().strip())
                        rows.append(labels)
                    elif rows:  # a blank line ends a sentence
                        yield from _sentence_samples(words, rows, data_path)
                        words, rows = [], []

    return reader


def _context(sentence: list[str], verb_index: int):
    n = len(sentence)
    mark = [0] * n
    words = []
    for offset in (-2, -1, 0, 1, 2):
        j = verb_index + offset
        if 0 <= j < n:
            mark[j] = 1
            words.append(sentence[j])
        else:
            words.append("bos" if offset < 0 else "eos")
    return words, mark


def _lookup(table: dict, key: str, what: str) -> int:
    if key not in table:
        raise InvalidArgumentError(f"conll05: the {what} {key!r} is not in the {what} "
                                   "dictionary; the dictionary files do not match the corpus")
    return table[key]


def reader_creator(corpus, word_dict=None, predicate_dict=None, label_dict=None):
    """Turn a corpus reader's (words, predicate, labels) into the nine id lists.

    >>> words, verbs, labels = get_dict()                         # doctest: +SKIP
    >>> reader = reader_creator(corpus, words, verbs, labels)     # doctest: +SKIP
    """
    def reader():
        for sentence, predicate, labels in corpus():
            n = len(sentence)
            context, mark = _context(sentence, labels.index("B-V"))
            word_ids = [word_dict.get(w, UNK_IDX) for w in sentence]
            context_ids = [[word_dict.get(w, UNK_IDX)] * n for w in context]
            pred_ids = [_lookup(predicate_dict, predicate, "predicate")] * n
            label_ids = [_lookup(label_dict, w, "label") for w in labels]
            yield (word_ids, *context_ids, pred_ids, mark, label_ids)

    return reader


def get_dict():
    """(word dict, verb dict, label dict) of the book's SRL model.

    >>> import spmd
    >>> word_dict, verb_dict, label_dict = spmd.dataset.conll05.get_dict()   # doctest: +SKIP
    """
    word_dict = load_dict(common.download(WORDDICT_URL, "conll05st", WORDDICT_MD5))
    verb_dict = load_dict(common.download(VERBDICT_URL, "conll05st", VERBDICT_MD5))
    label_dict = load_label_dict(common.download(TRGDICT_URL, "conll05st", TRGDICT_MD5))
    return word_dict, verb_dict, label_dict


def get_embedding() -> str:
    """The path of the pre-trained word vectors (a binary file the book reads itself).

    >>> import spmd
    >>> path = spmd.dataset.conll05.get_embedding()   # doctest: +SKIP
    """
    return common.download(EMB_URL, "conll05st", EMB_MD5)


def test():
    """The CoNLL-2005 WSJ test set as nine-list samples (see the module docstring).

    >>> import spmd
    >>> reader = spmd.dataset.conll05.test()   # doctest: +SKIP
    """
    word_dict, verb_dict, label_dict = get_dict()
    corpus = corpus_reader(common.download(DATA_URL, "conll05st", DATA_MD5),
                           words_name=_WORDS, props_name=_PROPS)
    return reader_creator(corpus, word_dict, verb_dict, label_dict)


def fetch():
    """Check that all conll05 files are in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.conll05.fetch()   # doctest: +SKIP
    """
    for url, md5 in ((WORDDICT_URL, WORDDICT_MD5), (VERBDICT_URL, VERBDICT_MD5),
                     (TRGDICT_URL, TRGDICT_MD5), (EMB_URL, EMB_MD5), (DATA_URL, DATA_MD5)):
        common.download(url, "conll05st", md5)
