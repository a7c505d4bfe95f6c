"""paddle.dataset.wmt14: Paddle's shrunk WMT14 French-English set, from Paddle's cache folder
(DATA_HOME/wmt14/wmt14.tgz: src.dict, trg.dict, train/train, test/test, gen/gen).

A dictionary is the first `dict_size` lines of src.dict / trg.dict (line number = id; they
start with <s>, <e>, <unk>). Each sample is (source ids of <s> words <e>, target ids of <s>
words, target ids of words <e>), from the tab-separated lines of the chosen file; unknown
words get UNK_IDX (2), and lines with more than 80 source or target ids are skipped.

>>> import spmd as paddle
>>> src, trg, trg_next = next(paddle.dataset.wmt14.train(30000)())   # doctest: +SKIP
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from . import common

__all__ = ["gen", "get_dict", "test", "train"]

URL_DEV_TEST = "http://www-lium.univ-lemans.fr/~schwenk/cslm_joint_paper/data/dev+test.tgz"
MD5_DEV_TEST = "7d7897317ddd8ba0ae5c5fa7248d3ff5"
URL_TRAIN = "http://paddlemodels.bj.bcebos.com/wmt/wmt14.tgz"
MD5_TRAIN = "0791583d57d5beb693b9414c5b36798c"
URL_MODEL = "http://paddlemodels.bj.bcebos.com/wmt%2Fwmt14.tgz"
MD5_MODEL = "0cb4a5366189b6acba876491c8724fa3"

START = "<s>"
END = "<e>"
UNK = "<unk>"
UNK_IDX = 2


def _one_member(tar, suffix: str, path: str):
    names = [m.name for m in tar if m.name.endswith(suffix)]
    if len(names) != 1:
        raise InvalidArgumentError(f"{path}: expected one member ending with {suffix!r}, found "
                                   f"{names}; it is not the wmt14.tgz Paddle reads")
    return tar.extractfile(names[0])


def _first_lines(f, size: int) -> dict:
    table = {}
    for i, line in enumerate(f):
        if i >= size:
            break
        table[line.decode().strip()] = i
    return table


def _read_dicts(tar_file: str, dict_size: int) -> tuple[dict, dict]:
    with common.open_tar(tar_file) as tar:
        src = _first_lines(_one_member(tar, "src.dict", tar_file), dict_size)
        trg = _first_lines(_one_member(tar, "trg.dict", tar_file), dict_size)
    return src, trg


def reader_creator(tar_file: str, file_name: str, dict_size: int):
    """A reader over the members of `tar_file` whose names end with `file_name`.

    >>> reader = reader_creator("wmt14.tgz", "train/train", 30000)   # doctest: +SKIP
    """
    def reader():
        src_dict, trg_dict = _read_dicts(tar_file, dict_size)
        with common.open_tar(tar_file) as tar:
            names = [m.name for m in tar if m.isfile() and m.name.endswith(file_name)]
            for name in names:
                for line in tar.extractfile(name):
                    parts = line.decode().strip().split("\t")
                    if len(parts) != 2:
                        continue
                    src_ids = [src_dict.get(w, UNK_IDX) for w in [START, *parts[0].split(), END]]
                    trg_ids = [trg_dict.get(w, UNK_IDX) for w in parts[1].split()]
                    if len(src_ids) > 80 or len(trg_ids) > 80:
                        continue
                    yield src_ids, [trg_dict[START], *trg_ids], [*trg_ids, trg_dict[END]]

    return reader


def train(dict_size: int):
    """The training pairs (train/train) with dictionaries of `dict_size` words.

    >>> import spmd
    >>> reader = spmd.dataset.wmt14.train(30000)   # doctest: +SKIP
    """
    return reader_creator(common.download(URL_TRAIN, "wmt14", MD5_TRAIN), "train/train",
                          dict_size)


def test(dict_size: int):
    """The test pairs (test/test) with dictionaries of `dict_size` words.

    >>> import spmd
    >>> reader = spmd.dataset.wmt14.test(30000)    # doctest: +SKIP
    """
    return reader_creator(common.download(URL_TRAIN, "wmt14", MD5_TRAIN), "test/test",
                          dict_size)


def gen(dict_size: int):
    """The generation pairs (gen/gen) with dictionaries of `dict_size` words.

    >>> import spmd
    >>> reader = spmd.dataset.wmt14.gen(30000)     # doctest: +SKIP
    """
    return reader_creator(common.download(URL_TRAIN, "wmt14", MD5_TRAIN), "gen/gen", dict_size)


def get_dict(dict_size: int, reverse: bool = True) -> tuple[dict, dict]:
    """(source dict, target dict) of `dict_size` words: id -> word when `reverse` (the
    default), word -> id otherwise.

    >>> import spmd
    >>> src_dict, trg_dict = spmd.dataset.wmt14.get_dict(30000)   # doctest: +SKIP
    """
    src, trg = _read_dicts(common.download(URL_TRAIN, "wmt14", MD5_TRAIN), dict_size)
    if reverse:
        src = {v: k for k, v in src.items()}
        trg = {v: k for k, v in trg.items()}
    return src, trg


def fetch():
    """Check that wmt14.tgz and the book's model archive are in the cache folder.

    >>> import spmd
    >>> spmd.dataset.wmt14.fetch()   # doctest: +SKIP
    """
    common.download(URL_TRAIN, "wmt14", MD5_TRAIN)
    common.download(URL_MODEL, "wmt14", MD5_MODEL)
