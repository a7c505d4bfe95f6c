"""spmd.dataset: the cache folder, missing and damaged files, md5 checks, the image data sets
(mnist, cifar, uci_housing) and paddle.dataset.common's split / cluster_files_reader."""
from __future__ import annotations

import collections
import io
import json
import os
import pickle
import warnings

import numpy as np
import pytest
from dataset_fixtures import _tar, py2_pickle, write_cifar, write_mnist, write_uci_housing

import spmd
import spmd as paddle
from spmd.dataset import cifar, common, mnist, uci_housing
from spmd.dataset._restricted_pickle import restricted_load
from spmd.errors import InvalidArgumentError, PreconditionError

pytestmark = pytest.mark.filterwarnings("ignore", category=common.DatasetMD5Warning)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "DATA_HOME", str(tmp_path))
    return tmp_path


MISSING = [
    (lambda ds: ds.mnist.train(), "mnist", "train-images-idx3-ubyte.gz", mnist.TRAIN_IMAGE_MD5),
    (lambda ds: ds.mnist.test(), "mnist", "t10k-images-idx3-ubyte.gz", mnist.TEST_IMAGE_MD5),
    (lambda ds: ds.cifar.train10(), "cifar", "cifar-10-python.tar.gz", cifar.CIFAR10_MD5),
    (lambda ds: ds.cifar.test100(), "cifar", "cifar-100-python.tar.gz", cifar.CIFAR100_MD5),
    (lambda ds: ds.uci_housing.train(), "uci_housing", "housing.data", uci_housing.MD5),
    (lambda ds: ds.imdb.word_dict(), "imdb", "imdb%2FaclImdb_v1.tar.gz",
     spmd.dataset.imdb.MD5),
    (lambda ds: ds.imikolov.build_dict(), "imikolov", "imikolov%2Fsimple-examples.tgz",
     spmd.dataset.imikolov.MD5),
    (lambda ds: ds.movielens.max_user_id(), "movielens", "movielens%2Fml-1m.zip",
     spmd.dataset.movielens.MD5),
    (lambda ds: ds.conll05.get_dict(), "conll05st", "conll05st%2FwordDict.txt",
     spmd.dataset.conll05.WORDDICT_MD5),
    (lambda ds: ds.conll05.get_embedding(), "conll05st", "conll05st%2Femb",
     spmd.dataset.conll05.EMB_MD5),
    (lambda ds: ds.wmt14.train(100), "wmt14", "wmt14.tgz", spmd.dataset.wmt14.MD5_TRAIN),
    (lambda ds: ds.wmt16.train(100, 100), "wmt16", "wmt16.tar.gz",
     spmd.dataset.wmt16.DATA_MD5),
]


@pytest.mark.parametrize("make,module,name,md5", MISSING)
def test_missing_file_names_file_folder_url_and_md5(home, make, module, name, md5):
    with pytest.raises(PreconditionError) as err:
        make(paddle.dataset)
    msg = str(err.value)
    folder = os.path.join(str(home), module)
    assert name in msg and folder in msg and md5 in msg
    assert "https://" in msg or "http://" in msg
    assert "never downloads" in msg and "DATA_HOME" in msg
    assert isinstance(err.value, RuntimeError)  # Paddle's failed download raises RuntimeError


def test_missing_file_does_not_create_folders(home):
    with pytest.raises(PreconditionError):
        paddle.dataset.mnist.train()
    assert not (home / "mnist").exists()


def test_data_home_is_read_at_every_call(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    write_mnist(str(first))
    monkeypatch.setattr(common, "DATA_HOME", str(first))
    assert len(list(mnist.test()())) == 100
    monkeypatch.setattr(common, "DATA_HOME", str(second))
    with pytest.raises(PreconditionError, match=str(second)):
        mnist.test()


def test_default_data_home_is_paddles_cache():
    assert common.DATA_HOME == os.path.expanduser("~/.cache/paddle/dataset")


def test_md5_mismatch_warns_once_per_file_and_match_is_silent(home):
    write_uci_housing(str(home))
    path = str(home / "uci_housing" / "housing.data")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert common.download(uci_housing.URL, "uci_housing", uci_housing.MD5) == path
        common.download(uci_housing.URL, "uci_housing", uci_housing.MD5)
    mismatches = [w for w in caught if issubclass(w.category, common.DatasetMD5Warning)]
    assert len(mismatches) == 1
    assert uci_housing.MD5 in str(mismatches[0].message)
    assert common.md5file(path) in str(mismatches[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        common.download(uci_housing.URL, "uci_housing", common.md5file(path))


def test_md5file_and_save_name(home):
    (home / "m").mkdir()
    (home / "m" / "saved.bin").write_bytes(b"abc")
    assert common.md5file(str(home / "m" / "saved.bin")) == "900150983cd24fb0d6963f7d28e17f72"
    got = common.download("http://x/y/other.bin", "m", "900150983cd24fb0d6963f7d28e17f72",
                          save_name="saved.bin")
    assert got == str(home / "m" / "saved.bin")


def test_mnist_samples(home):
    write_mnist(str(home), train_count=150, test_count=100)
    samples = list(paddle.dataset.mnist.train()())
    assert len(samples) == 150  # not a multiple of Paddle's 100-image buffer: all are read
    image, label = samples[0]
    assert image.shape == (784,) and image.dtype == np.float32
    assert isinstance(label, int) and 0 <= label <= 9
    images = np.stack([s[0] for s in samples])
    assert images.min() >= -1.0 and images.max() <= 1.0
    # the pixel values are k / 255 * 2 - 1 for bytes k
    k = np.round((images + 1.0) / 2.0 * 255.0)
    np.testing.assert_allclose(images, (k / 255.0 * 2.0 - 1.0), atol=1e-6)


def test_mnist_damaged_file(home):
    write_mnist(str(home))
    path = home / "mnist" / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(InvalidArgumentError, match="train-images-idx3-ubyte.gz"):
        list(mnist.train()())


def test_cifar_samples_and_cycle(home):
    write_cifar(str(home))
    samples = list(cifar.train10()())
    assert len(samples) == 5  # data_batch_2 (2), then data_batch_1 (3): archive order
    image, label = samples[0]
    assert image.shape == (3072,) and image.dtype == np.float32
    assert 0.0 <= image.min() and image.max() <= 1.0 and isinstance(label, int)
    it = cifar.test10(cycle=True)()
    first = [next(it)[1] for _ in range(3)]
    again = [next(it)[1] for _ in range(3)]
    assert first == again
    assert len(list(cifar.train100()())) == 4 and len(list(cifar.test100()())) == 2


def test_cifar_refuses_a_pickle_that_runs_code(home):
    evil = b"\x80\x02cos\nsystem\nU\x04trueR."
    (home / "cifar").mkdir()
    _tar(str(home / "cifar" / "cifar-10-python.tar.gz"),
         [("cifar-10-python/data_batch_1", evil)])
    with pytest.raises(InvalidArgumentError, match="os.system"):
        list(cifar.train10()())


def test_cifar_batch_without_data(home):
    (home / "cifar").mkdir()
    _tar(str(home / "cifar" / "cifar-10-python.tar.gz"),
         [("cifar-10-python/test_batch", py2_pickle({"labels": [1]}))])
    with pytest.raises(InvalidArgumentError, match="'data'"):
        list(cifar.test10()())


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_restricted_load_reads_plain_python3_pickles(protocol):
    value = {"a": [np.arange(6, dtype=np.int64).reshape(2, 3), np.float32(1.5)],
             "b": (b"x", "y", 3, 2.5, None, True), "c": {1, 2}, "d": frozenset([3])}
    got = restricted_load(io.BytesIO(pickle.dumps(value, protocol=protocol)), "memory")
    np.testing.assert_array_equal(got["a"][0], value["a"][0])
    assert got["a"][1] == np.float32(1.5) and got["b"] == value["b"]
    assert got["c"] == {1, 2} and got["d"] == frozenset([3])


def test_restricted_load_names_the_refused_global():
    payload = pickle.dumps(collections.OrderedDict(a=1), protocol=2)
    with pytest.raises(InvalidArgumentError, match="collections.OrderedDict.*only"):
        restricted_load(io.BytesIO(payload), "memory")
    with pytest.raises(InvalidArgumentError, match="damaged"):
        restricted_load(io.BytesIO(b"\x80\x02}"), "memory")


def test_uci_housing_samples(home):
    write_uci_housing(str(home))
    train = list(uci_housing.train()())
    test = list(uci_housing.test()())
    assert (len(train), len(test)) == (9, 3)  # int(12 * 0.8) rows for training
    features, price = train[0]
    assert features.shape == (13,) and price.shape == (1,)
    assert features.dtype == np.float64 and price.dtype == np.float64
    (first,) = uci_housing.predict_reader()
    np.testing.assert_array_equal(first, test[0][0])
    raw = np.loadtxt(str(home / "uci_housing" / "housing.data"))
    np.testing.assert_array_equal(np.stack([p for _, p in train + test])[:, 0], raw[:, -1])
    assert uci_housing.feature_names[0] == "CRIM" and len(uci_housing.feature_names) == 13


def test_uci_housing_bad_file(home):
    (home / "uci_housing").mkdir()
    (home / "uci_housing" / "housing.data").write_text("1 2 3\n")
    with pytest.raises(InvalidArgumentError, match="multiple of 14"):
        uci_housing.train()


def test_uci_housing_fluid_model(home):
    (home / "uci_housing").mkdir()
    _tar(str(home / "uci_housing" / "fit_a_line.fluid.tar"),
         [("fit_a_line.inference.model/__model__", b"model")], mode="w")
    folder = uci_housing.fluid_model()
    with open(os.path.join(folder, "fit_a_line.inference.model", "__model__"), "rb") as f:
        assert f.read() == b"model"


def test_split_and_cluster_files_reader(tmp_path):
    samples = [(np.full(3, i, np.float32), i) for i in range(7)]
    pattern = str(tmp_path / "part-%03d.pickle")
    common.split(lambda: iter(samples), 3, pattern)
    files = sorted(os.listdir(tmp_path))
    assert files == ["part-000.pickle", "part-001.pickle", "part-002.pickle"]
    glob_pattern = str(tmp_path / "part-*.pickle")
    mine = list(common.cluster_files_reader(glob_pattern, 2, 0)())
    theirs = list(common.cluster_files_reader(glob_pattern, 2, 1)())
    assert [s[1] for s in mine] == [0, 1, 2, 6] and [s[1] for s in theirs] == [3, 4, 5]
    np.testing.assert_array_equal(mine[3][0], np.full(3, 6, np.float32))


def test_split_with_text_dumper_and_loader(tmp_path):
    pattern = str(tmp_path / "part-%d.json")
    common.split(lambda: iter(range(5)), 2, pattern, dumper=json.dump)
    reader = common.cluster_files_reader(str(tmp_path / "part-*.json"), 1, 0, loader=json.load)
    assert list(reader()) == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="dumper"):
        common.split(lambda: iter(range(2)), 1, pattern, dumper="json")
    with pytest.raises(InvalidArgumentError, match="line_count"):
        common.split(lambda: iter(range(2)), 0, pattern)


def test_public_names():
    # fluid 1.8.5's paddle.dataset.__all__, plus common
    assert sorted(paddle.dataset.__all__) == ["cifar", "common", "conll05", "flowers", "image",
                                              "imdb", "imikolov", "mnist", "movielens", "mq2007",
                                              "sentiment", "uci_housing", "voc2012", "wmt14",
                                              "wmt16"]
    for name in paddle.dataset.__all__:
        assert hasattr(paddle.dataset, name)
    for name in common.__all__:
        assert hasattr(common, name)
    assert spmd.dataset.common is common
