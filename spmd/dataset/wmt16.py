"""paddle.dataset.wmt16: the WMT16 multimodal English-German set (Multi30K, tokenised by
Paddle), from Paddle's cache folder (DATA_HOME/wmt16/wmt16.tar.gz: wmt16/train, wmt16/test,
wmt16/val, lines "english<TAB>german").

A dictionary of `dict_size` entries is <s>, <e>, <unk> (ids 0, 1, 2) and then the words of
that language's side of wmt16/train by descending count (ties in order of first appearance);
as in Paddle it is kept in DATA_HOME/wmt16/<lang>_<dict_size>.dict and rebuilt when that file
is missing or has another number of lines (written atomically, so ranks sharing the folder do
not see half a file; used from memory when the folder is read-only). Each sample is (source
ids of <s> words <e>, target ids of <s> words, target ids of words <e>).

>>> import spmd as paddle
>>> src, trg, trg_next = next(paddle.dataset.wmt16.train(10000, 10000)())   # doctest: +SKIP
"""
from __future__ import annotations

import collections
import os
import tempfile

from ..errors import InvalidArgumentError
from . import common

__all__ = ["fetch", "get_dict", "test", "train", "validation"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/wmt/wmt16.tar.gz"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220
START_MARK = "<s>"
END_MARK = "<e>"
UNK_MARK = "<unk>"


def _tar_path() -> str:
    return common.download(DATA_URL, "wmt16", DATA_MD5, "wmt16.tar.gz")


def _build_words(tar_file: str, dict_size: int, lang: str) -> list[str]:
    counts: dict = collections.defaultdict(int)
    column = 0 if lang == "en" else 1
    with common.open_tar(tar_file) as tar:
        for line in common.tar_member(tar, "wmt16/train", tar_file):
            parts = line.decode().strip().split("\t")
            if len(parts) != 2:
                continue
            for word in parts[column].split():
                counts[word] += 1
    words = [START_MARK, END_MARK, UNK_MARK]
    # sorted() is stable: equal counts keep their order of first appearance, as in Paddle
    for idx, (word, _) in enumerate(sorted(counts.items(), key=lambda x: x[1], reverse=True)):
        if idx + 3 == dict_size:
            break
        words.append(word)
    return words


def _save_atomically(path: str, words: list[str]):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write("".join(w + "\n" for w in words).encode())
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache folder: the dictionary is used from memory


def _dict_words(tar_file: str | None, dict_size: int, lang: str) -> list[str]:
    path = os.path.join(common.DATA_HOME, "wmt16", f"{lang}_{dict_size}.dict")
    if os.path.exists(path):
        with open(path, "rb") as f:
            lines = f.readlines()
        if len(lines) == dict_size:
            return [line.decode().strip() for line in lines]
    words = _build_words(tar_file or _tar_path(), dict_size, lang)
    _save_atomically(path, words)
    return words


def _load_dict(tar_file: str | None, dict_size: int, lang: str, reverse: bool = False) -> dict:
    words = _dict_words(tar_file, dict_size, lang)
    if reverse:
        return dict(enumerate(words))
    return {w: i for i, w in enumerate(words)}


def _check_lang(lang: str):
    if lang not in ("en", "de"):
        raise InvalidArgumentError(f"wmt16: the language must be 'en' (English) or 'de' "
                                   f"(German), got {lang!r}")


def _dict_sizes(src_dict_size: int, trg_dict_size: int, src_lang: str) -> tuple[int, int]:
    en_first = src_lang == "en"
    return (min(src_dict_size, TOTAL_EN_WORDS if en_first else TOTAL_DE_WORDS),
            min(trg_dict_size, TOTAL_DE_WORDS if en_first else TOTAL_EN_WORDS))


def reader_creator(tar_file: str, file_name: str, src_dict_size: int, trg_dict_size: int,
                   src_lang: str):
    """A reader over the member `file_name` of the archive, `src_lang` being the source side.

    >>> reader = reader_creator("wmt16.tar.gz", "wmt16/train", 100, 100, "en")  # doctest: +SKIP
    """
    def reader():
        trg_lang = "de" if src_lang == "en" else "en"
        src_dict = _load_dict(tar_file, src_dict_size, src_lang)
        trg_dict = _load_dict(tar_file, trg_dict_size, trg_lang)
        # both dictionaries put <s>, <e>, <unk> first: the source's ids serve both sides
        start, end, unk = src_dict[START_MARK], src_dict[END_MARK], src_dict[UNK_MARK]
        src_col = 0 if src_lang == "en" else 1
        with common.open_tar(tar_file) as tar:
            for line in common.tar_member(tar, file_name, tar_file):
                parts = line.decode().strip().split("\t")
                if len(parts) != 2:
                    continue
                src_ids = [start, *(src_dict.get(w, unk) for w in parts[src_col].split()), end]
                trg_ids = [trg_dict.get(w, unk) for w in parts[1 - src_col].split()]
                yield src_ids, [start, *trg_ids], [*trg_ids, end]

    return reader


def _creator(member: str, src_dict_size: int, trg_dict_size: int, src_lang: str):
    _check_lang(src_lang)
    src_size, trg_size = _dict_sizes(src_dict_size, trg_dict_size, src_lang)
    return reader_creator(_tar_path(), member, src_size, trg_size, src_lang)


def train(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The training pairs (wmt16/train); src_lang "en" or "de" picks the source side.

    >>> import spmd
    >>> reader = spmd.dataset.wmt16.train(10000, 10000, src_lang="en")   # doctest: +SKIP
    """
    return _creator("wmt16/train", src_dict_size, trg_dict_size, src_lang)


def test(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The test pairs (wmt16/test).

    >>> import spmd
    >>> reader = spmd.dataset.wmt16.test(10000, 10000)   # doctest: +SKIP
    """
    return _creator("wmt16/test", src_dict_size, trg_dict_size, src_lang)


def validation(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The validation pairs (wmt16/val).

    >>> import spmd
    >>> reader = spmd.dataset.wmt16.validation(10000, 10000)   # doctest: +SKIP
    """
    return _creator("wmt16/val", src_dict_size, trg_dict_size, src_lang)


def get_dict(lang: str, dict_size: int, reverse: bool = False) -> dict:
    """The `lang` dictionary of `dict_size` entries (at most 11250 English, 19220 German):
    word -> id, or id -> word when `reverse`. Paddle requires a reader to have built it
    first; spmd builds it from the archive when needed.

    >>> import spmd
    >>> en = spmd.dataset.wmt16.get_dict("en", 10000)   # doctest: +SKIP
    """
    _check_lang(lang)
    dict_size = min(dict_size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)
    return _load_dict(None, dict_size, lang, reverse)


def fetch():
    """Check that wmt16.tar.gz is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.wmt16.fetch()   # doctest: +SKIP
    """
    _tar_path()
