"""Tiny data set files in the real formats paddle.dataset reads, and the cases both the oracle
(tests/oracle/make_dataset.py, PaddlePaddle 1.8.5 on Python 3.7) and tests/unit/test_dataset*.py
(spmd) run on them.

`write_all(home)` lays the files out under `home` as Paddle's cache folder holds them
(home/mnist/train-images-idx3-ubyte.gz, home/cifar/cifar-10-python.tar.gz, ...), from fixed
seeds, so both sides read the same content. `CASES` maps a case name to a function of the
data set package (`paddle.dataset` or `spmd.dataset`) returning that case's samples through the
public API; `canon` turns samples into JSON-comparable values. This file runs on Python 3.7
(the oracle) and on the project's Python alike, so it keeps to syntax both accept.
"""
import gzip
import hashlib
import io
import os
import struct
import tarfile
import zipfile

import numpy as np

SEED = 20260523


# ----------------------------------------------------------------------------- writers' tools

def _folder(home, name):
    path = os.path.join(home, name)
    if not os.path.isdir(path):
        os.makedirs(path)
    return path


def _gzip_bytes(payload):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as g:
        g.write(payload)
    return buf.getvalue()


def _tar(path, members, mode="w:gz"):
    """members: list of (name, bytes or None for a folder), in archive order."""
    with open(path, "wb") as raw:
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if mode == "w:gz" \
            else None
        with tarfile.open(fileobj=gz or raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name, payload in members:
                info = tarfile.TarInfo(name)
                info.mtime = 0
                if payload is None:
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                else:
                    info.size = len(payload)
                    info.mode = 0o644
                    tar.addfile(info, io.BytesIO(payload))
        if gz is not None:
            gz.close()


def py2_pickle(obj):
    """`obj` pickled as Python 2's cPickle (protocol 2) writes it, the way CIFAR's batches
    are: str/bytes as Python 2 str, numpy arrays through numpy.core.multiarray._reconstruct."""
    out = [b"\x80\x02"]
    _emit(obj, out)
    out.append(b".")
    return b"".join(out)


def _emit(obj, out):
    if obj is None:
        out.append(b"N")
    elif isinstance(obj, bool):
        out.append(b"\x88" if obj else b"\x89")
    elif isinstance(obj, int):
        out.append(b"K" + bytes([obj]) if 0 <= obj < 256 else b"J" + struct.pack("<i", obj))
    elif isinstance(obj, (str, bytes)):
        data = obj.encode("latin-1") if isinstance(obj, str) else obj
        if len(data) < 256:
            out.append(b"U" + bytes([len(data)]) + data)
        else:
            out.append(b"T" + struct.pack("<I", len(data)) + data)
    elif isinstance(obj, (list, tuple)):
        out.append(b"](" if isinstance(obj, list) else b"(")
        for item in obj:
            _emit(item, out)
        out.append(b"e" if isinstance(obj, list) else b"t")
    elif isinstance(obj, dict):
        out.append(b"}(")
        for key, value in obj.items():
            _emit(key, out)
            _emit(value, out)
        out.append(b"u")
    elif isinstance(obj, np.ndarray):
        _emit_array(obj, out)
    else:
        raise TypeError(f"py2_pickle: cannot write {type(obj)!r}")


def _emit_array(arr, out):
    out.append(b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n")
    _emit((0,), out)
    _emit(b"b", out)
    out.append(b"\x87R(")  # TUPLE3 REDUCE, then the state tuple
    _emit(1, out)
    _emit(tuple(int(n) for n in arr.shape), out)
    out.append(b"cnumpy\ndtype\n")
    _emit((arr.dtype.str[1:], 0, 1), out)
    out.append(b"R")
    _emit((3, arr.dtype.str[0].replace("=", "|"), None, None, None, -1, -1, 0), out)
    out.append(b"b")
    _emit(False, out)
    _emit(np.ascontiguousarray(arr).tobytes(), out)
    out.append(b"tb")


# ----------------------------------------------------------------------------- the data sets

def write_mnist(home, train_count=100, test_count=100):
    r = np.random.RandomState(SEED)
    folder = _folder(home, "mnist")
    for prefix, count in (("train", train_count), ("t10k", test_count)):
        pixels = r.randint(0, 256, size=(count, 28, 28)).astype(np.uint8)
        labels = r.randint(0, 10, size=count).astype(np.uint8)
        images = struct.pack(">IIII", 2051, count, 28, 28) + pixels.tobytes()
        with open(os.path.join(folder, prefix + "-images-idx3-ubyte.gz"), "wb") as f:
            f.write(_gzip_bytes(images))
        with open(os.path.join(folder, prefix + "-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(_gzip_bytes(struct.pack(">II", 2049, count) + labels.tobytes()))


def _cifar_batch(r, count, classes, label_key, extra=None):
    batch = {"batch_label": "tiny batch",
             label_key: [int(v) for v in r.randint(0, classes, size=count)],
             "data": r.randint(0, 256, size=(count, 3072)).astype(np.uint8),
             "filenames": [f"img_{i}.png" for i in range(count)]}
    if extra:
        batch[extra] = [int(v) for v in r.randint(0, 20, size=count)]
    return py2_pickle(batch)


def write_cifar(home):
    r = np.random.RandomState(SEED + 1)
    folder = _folder(home, "cifar")
    meta10 = py2_pickle({"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072})
    _tar(os.path.join(folder, "cifar-10-python.tar.gz"), [
        ("cifar-10-python", None),
        ("cifar-10-python/data_batch_2", _cifar_batch(r, 2, 10, "labels")),
        ("cifar-10-python/readme.html", b"<html></html>"),
        ("cifar-10-python/test_batch", _cifar_batch(r, 3, 10, "labels")),
        ("cifar-10-python/data_batch_1", _cifar_batch(r, 3, 10, "labels")),
        ("cifar-10-python/batches.meta", meta10)])
    _tar(os.path.join(folder, "cifar-100-python.tar.gz"), [
        ("cifar-100-python", None),
        ("cifar-100-python/meta", py2_pickle({"fine_label_names": ["f0", "f1"]})),
        ("cifar-100-python/train", _cifar_batch(r, 4, 100, "fine_labels", "coarse_labels")),
        ("cifar-100-python/test", _cifar_batch(r, 2, 100, "fine_labels", "coarse_labels"))])


def write_uci_housing(home, rows=12):
    r = np.random.RandomState(SEED + 2)
    scales = np.array([90, 100, 28, 1, 0.9, 9, 100, 12, 24, 700, 22, 400, 38, 50.0])
    data = r.uniform(0, 1, size=(rows, 14)) * scales
    lines = [" " + " ".join(f"{v:.4f}" for v in row) for row in data]
    with open(os.path.join(_folder(home, "uci_housing"), "housing.data"), "w") as f:
        f.write("\n".join(lines) + "\n")


_WORDS = ["the", "and", "movie", "film", "good", "bad", "great", "plot", "actor", "it's",
          "boring", "Story", "FUN", "end"]
_WEIGHTS = np.array([30, 22, 8, 8, 5, 5, 4, 4, 3, 3, 2, 2, 2, 2], dtype=np.float64)


def _review(r, words):
    picks = r.choice(len(_WORDS), size=words, p=_WEIGHTS / _WEIGHTS.sum())
    text = " ".join(_WORDS[i] for i in picks)
    return (text[:40] + ", " + text[40:] + "!<br /><br />Really.\n\r\n").encode()


def write_imdb(home):
    r = np.random.RandomState(SEED + 3)
    members = [("aclImdb", None), ("aclImdb/imdb.vocab", "\n".join(_WORDS).encode())]
    for split in ("test", "train"):
        for label in ("neg", "pos", "unsup"):
            if split == "test" and label == "unsup":
                continue
            for k in range(3):
                name = f"aclImdb/{split}/{label}/{k}_{1 + (k * 3) % 10}.txt"
                members.append((name, _review(r, 60)))
    _tar(os.path.join(_folder(home, "imdb"), "imdb%2FaclImdb_v1.tar.gz"), members)


_PTB = ["the", "N", "<unk>", "of", "to", "a", "in", "and", "'s", "for", "that", "$", "is",
        "market", "stock"]
_PTB_P = np.array([20, 12, 10, 8, 7, 7, 6, 6, 4, 4, 4, 3, 3, 3, 3], dtype=np.float64)


def _ptb_text(r, lines):
    out = []
    for _ in range(lines):
        n = r.randint(1, 14)
        picks = r.choice(len(_PTB), size=n, p=_PTB_P / _PTB_P.sum())
        out.append(" " + " ".join(_PTB[i] for i in picks) + " \n")
    return "".join(out).encode()


def write_imikolov(home):
    r = np.random.RandomState(SEED + 4)
    _tar(os.path.join(_folder(home, "imikolov"), "imikolov%2Fsimple-examples.tgz"), [
        ("./simple-examples/", None), ("./simple-examples/data/", None),
        ("./simple-examples/data/ptb.train.txt", _ptb_text(r, 40)),
        ("./simple-examples/data/ptb.valid.txt", _ptb_text(r, 14)),
        ("./simple-examples/data/ptb.test.txt", _ptb_text(r, 5))])


_MOVIES = ["1::Toy Story (1995)::Animation|Children's|Comedy",
           "2::Jumanji (1995)::Adventure|Children's|Fantasy",
           "3::Grumpier Old Men (1995)::Comedy|Romance",
           "5::Father of the Bride Part II (1995)::Comedy",
           "7::M\xe9tisse (Caf\xe9 au Lait) (1993)::Comedy",
           "11::American President, The (1995)::Comedy|Drama|Romance",
           "13::Balto (1995)::Animation|Children's",
           "21::Get Shorty (1995)::Action|Comedy|Drama"]


def write_movielens(home):
    r = np.random.RandomState(SEED + 5)
    ages = [1, 18, 25, 35, 45, 50, 56]
    users = []
    for uid in (1, 2, 3, 4, 6, 9):
        gender, age = "MF"[r.randint(0, 2)], ages[r.randint(0, 7)]
        job, zipcode = r.randint(0, 21), r.randint(0, 99999)
        users.append(f"{uid}::{gender}::{age}::{job}::{zipcode:05d}")
    movie_ids = [int(m.split("::")[0]) for m in _MOVIES]
    ratings = []
    for _ in range(60):
        uid, movie = (1, 2, 3, 4, 6, 9)[r.randint(0, 6)], movie_ids[r.randint(0, len(movie_ids))]
        stars, stamp = r.randint(1, 6), 978300000 + r.randint(0, 100000)
        ratings.append(f"{uid}::{movie}::{stars}::{stamp}")
    path = os.path.join(_folder(home, "movielens"), "movielens%2Fml-1m.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, lines in (("movies.dat", _MOVIES), ("users.dat", users),
                            ("ratings.dat", ratings)):
            info = zipfile.ZipInfo("ml-1m/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, ("\n".join(lines) + "\n").encode("latin-1"))


# one row per word: word, then the props columns (verb lemma or '-', one column per predicate)
_SRL = [
    [("The", "-", "(A0*"), ("cat", "-", "*)"), ("chased", "chase", "(V*)"),
     ("the", "-", "(A1*"), ("mouse", "-", "*)"), (".", "-", "*")],
    [("John", "-", "(A0*)", "*"), ("said", "say", "(V*)", "*"), ("he", "-", "(A1*", "(A0*)"),
     ("would", "-", "*", "(AM-MOD*)"), ("leave", "leave", "*", "(V*)"),
     ("tomorrow", "-", "*)", "(AM-TMP*)"), (".", "-", "*", "*")],
    [("Stocks", "-", "(A1*)"), ("fell", "fall", "(V*)"), (".", "-", "*")],
]


def write_conll05(home):
    folder = _folder(home, "conll05st")
    words = "".join("".join(row[0] + "\n" for row in sent) + "\n" for sent in _SRL)
    props = "".join("".join(" ".join(row[1:]) + "\n" for row in sent) + "\n" for sent in _SRL)
    _tar(os.path.join(folder, "conll05st-tests.tar.gz"), [
        ("conll05st-release", None),
        ("conll05st-release/test.wsj/words/test.wsj.words.gz", _gzip_bytes(words.encode())),
        ("conll05st-release/test.wsj/props/test.wsj.props.gz", _gzip_bytes(props.encode()))])
    files = {
        "conll05st%2FwordDict.txt": ["<unk>", "the", "The", "cat", "chased", "mouse", ".",
                                     "John", "said", "he", "would", "leave", "bos", "eos",
                                     "fell"],
        "conll05st%2FverbDict.txt": ["chase", "say", "leave", "fall"],
        "conll05st%2FtargetDict.txt": ["B-A0", "I-A0", "B-A1", "I-A1", "B-AM-MOD", "I-AM-MOD",
                                       "B-AM-TMP", "I-AM-TMP", "B-V", "I-V", "O"]}
    for name, lines in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    emb = np.random.RandomState(SEED + 6).uniform(-1, 1, size=(15, 4)).astype(np.float32)
    with open(os.path.join(folder, "conll05st%2Femb"), "wb") as f:
        f.write(b"\0" * 16 + emb.tobytes())


def _pairs(r, lines, src_vocab, trg_vocab):
    out = []
    for i in range(lines):
        src = [src_vocab[k] for k in r.randint(0, len(src_vocab), size=r.randint(1, 8))]
        trg = [trg_vocab[k] for k in r.randint(0, len(trg_vocab), size=r.randint(1, 8))]
        out.append(" ".join(src) + "\t" + " ".join(trg))
        if i == 2:
            out.append("a line without a tab")
    return out


_FR = ["le", "chat", "noir", "mange", "la", "souris", "très", "vite", "ici"]
_EN = ["the", "black", "cat", "eats", "mouse", "very", "fast", "here"]


def write_wmt14(home):
    r = np.random.RandomState(SEED + 7)
    train = _pairs(r, 8, _FR, _EN) + [" ".join(["le"] * 85) + "\tthe cat"]
    text = {"train/train": train, "test/test": _pairs(r, 4, _FR, _EN),
            "gen/gen": _pairs(r, 3, _FR, _EN),
            "src.dict": ["<s>", "<e>", "<unk>"] + _FR, "trg.dict": ["<s>", "<e>", "<unk>"] + _EN}
    members = [("wmt14", None)]
    for name in ("src.dict", "trg.dict", "train/train", "test/test", "gen/gen"):
        members.append(("wmt14/" + name, ("\n".join(text[name]) + "\n").encode()))
    _tar(os.path.join(_folder(home, "wmt14"), "wmt14.tgz"), members)


_DE = ["die", "katze", "schwarze", "frisst", "maus", "sehr", "schnell", "hier", "über"]


def write_wmt16(home):
    r = np.random.RandomState(SEED + 8)
    members = [("wmt16", None)]
    for name, count in (("train", 20), ("test", 4), ("val", 3)):
        members.append(("wmt16/" + name,
                        ("\n".join(_pairs(r, count, _EN, _DE)) + "\n").encode()))
    _tar(os.path.join(_folder(home, "wmt16"), "wmt16.tar.gz"), members)


def write_all(home):
    """Every tiny data set file under `home`, laid out as Paddle's cache folder."""
    for write in (write_mnist, write_cifar, write_uci_housing, write_imdb, write_imikolov,
                  write_movielens, write_conll05, write_wmt14, write_wmt16):
        write(home)


# ----------------------------------------------------------------------------- comparing

def canon(value):
    """Samples as JSON-comparable values: tuples, bytes, dicts and arrays tagged (large arrays
    by their sha256 and sum, so the stored file stays small while equality stays exact)."""
    if isinstance(value, np.ndarray):
        head = {"dtype": value.dtype.name, "shape": list(value.shape)}
        if value.size > 64:
            head["sha256"] = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
            head["sum"] = float(value.astype(np.float64).sum())
        else:
            head["data"] = value.reshape(-1).tolist()
        return {"ndarray": head}
    if isinstance(value, np.generic):
        return {"scalar": value.item(), "dtype": value.dtype.name}
    if isinstance(value, bytes):
        return {"bytes": value.decode("latin-1")}
    if isinstance(value, tuple):
        return {"tuple": [canon(v) for v in value]}
    if isinstance(value, list):
        return [canon(v) for v in value]
    if isinstance(value, dict):
        items = [[canon(k), canon(v)] for k, v in value.items()]
        return {"dict": sorted(items, key=repr)}
    return value


def _inverse(table):
    return {v: k for k, v in table.items()}


def _movielens(ds, reader):
    # Paddle numbers categories and title words in set order (it varies between processes):
    # compare them as names
    cats = _inverse(ds.movielens.movie_categories())
    words = _inverse(ds.movielens.get_movie_title_dict())
    out = []
    for s in reader():
        out.append(s[:5] + [[cats[i] for i in s[5]], [words[i] for i in s[6]], s[7]])
    return out


def _movielens_meta(ds):
    m = ds.movielens
    return [m.max_movie_id(), m.max_user_id(), m.max_job_id(), sorted(m.movie_categories()),
            sorted(m.get_movie_title_dict()), sorted(m.user_info()), sorted(m.movie_info()),
            [str(m.user_info()[k]) for k in sorted(m.user_info())],
            [str(m.movie_info()[k]) for k in sorted(m.movie_info())]]


def _conll05(ds):
    words, verbs, labels = ds.conll05.get_dict()
    names = _inverse(labels)
    out = []
    for s in ds.conll05.test()():
        out.append(list(s[:8]) + [[names[i] for i in s[8]]])
    return [words, verbs, sorted(labels), labels["O"], out]


def _imikolov(ds, min_freq, n, kind, which):
    d = ds.imikolov.build_dict(min_freq)
    data_type = getattr(ds.imikolov.DataType, kind)
    return [d, list(getattr(ds.imikolov, which)(d, n, data_type)())]


def _imdb(ds):
    d = ds.imdb.word_dict()
    import re
    small = ds.imdb.build_dict(re.compile(r"aclImdb/train/.*\.txt$"), 3)
    return [d, small, list(ds.imdb.train(small)()), list(ds.imdb.test(d)())]


def _wmt16(ds, which, src, trg, lang):
    return list(getattr(ds.wmt16, which)(src, trg, lang)())


def _wmt16_dicts(ds):
    # sizes no larger than the tiny vocabularies (+3 marks): Paddle's get_dict rebuilds a
    # shorter dictionary file from a wrong archive path and fails
    ds.wmt16.train(9, 8, "en")
    return [ds.wmt16.get_dict("en", 9), ds.wmt16.get_dict("de", 8, reverse=True)]


CASES = {
    "mnist_train": lambda ds: list(ds.mnist.train()()),
    "mnist_test": lambda ds: list(ds.mnist.test()()),
    "cifar_train10": lambda ds: list(ds.cifar.train10()()),
    "cifar_test10": lambda ds: list(ds.cifar.test10()()),
    "cifar_train100": lambda ds: list(ds.cifar.train100()()),
    "cifar_test100": lambda ds: list(ds.cifar.test100()()),
    "uci_train": lambda ds: list(ds.uci_housing.train()()),
    "uci_test": lambda ds: list(ds.uci_housing.test()()),
    "imdb": _imdb,
    "imikolov_ngram_train": lambda ds: _imikolov(ds, 50, 5, "NGRAM", "train"),
    "imikolov_ngram_test": lambda ds: _imikolov(ds, 3, 3, "NGRAM", "test"),
    "imikolov_seq_train": lambda ds: _imikolov(ds, 3, 6, "SEQ", "train"),
    "imikolov_seq_all": lambda ds: _imikolov(ds, 3, 0, "SEQ", "test"),
    "movielens_train": lambda ds: _movielens(ds, ds.movielens.train()),
    "movielens_test": lambda ds: _movielens(ds, ds.movielens.test(rand_seed=3, test_ratio=0.3)),
    "movielens_meta": _movielens_meta,
    "conll05": _conll05,
    "wmt14_train": lambda ds: list(ds.wmt14.train(8)()),
    "wmt14_test": lambda ds: list(ds.wmt14.test(30000)()),
    "wmt14_gen": lambda ds: list(ds.wmt14.gen(6)()),
    "wmt14_dict": lambda ds: [ds.wmt14.get_dict(8), ds.wmt14.get_dict(5, reverse=False)],
    "wmt16_train_en": lambda ds: _wmt16(ds, "train", 9, 8, "en"),
    "wmt16_test_de": lambda ds: _wmt16(ds, "test", 30000, 6, "de"),
    "wmt16_val_en": lambda ds: _wmt16(ds, "validation", 5, 30000, "en"),
    "wmt16_dicts": _wmt16_dicts,
}
