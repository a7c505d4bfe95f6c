"""spmd.dataset's flowers, sentiment, mq2007, voc2012 and image against PaddlePaddle 1.8.5's own
paddle.dataset (with OpenCV 4.2), both reading the same tiny files
(tests/dataset_fixtures_more.py; the oracle's samples are in tests/oracle/data/dataset_more.json,
made by tests/oracle/make_dataset_more.py). spmd runs with its own code only
(`image.BACKENDS = ()`: PNG decoder, numpy bicubic resize), so the results do not depend on
whether OpenCV or Pillow is installed here."""
from __future__ import annotations

import json
import os
import pathlib
import warnings

import numpy as np
import pytest
from dataset_fixtures import canon
from dataset_fixtures_more import CASES, png_bytes, png_cases, write_more
from oracle_io import load

import spmd
from spmd.dataset import image
from spmd.dataset._restricted_pickle import restricted_load
from spmd.dataset.common import DatasetMD5Warning
from spmd.errors import InvalidArgumentError, PreconditionError

ORACLE = load("dataset_more")


@pytest.fixture
def own_code(monkeypatch):
    monkeypatch.setattr(image, "BACKENDS", ())


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paddle_dataset_more")
    write_more(str(folder))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spmd.dataset.common, "DATA_HOME", str(folder))
        mp.setattr(image, "BACKENDS", ())
        yield folder


def assert_same(got, want, where="sample"):
    """canon()'d values equal; float arrays stored in full within float32 rounding."""
    if isinstance(want, dict) and "ndarray" in want and "data" in want["ndarray"]:
        g, w = got["ndarray"], want["ndarray"]
        assert (g["dtype"], g["shape"]) == (w["dtype"], w["shape"]), where
        np.testing.assert_allclose(g["data"], w["data"], rtol=1e-6, atol=1e-4, err_msg=where)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
@pytest.mark.parametrize("name", [n for n in CASES if n not in ("voc2012", "image_decode_gray")])
def test_same_samples_as_paddle(home, name):
    got = json.loads(json.dumps(canon(CASES[name](spmd.dataset))))
    assert_same(got, ORACLE[name], name)


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
def test_voc2012_gives_what_pillow_decodes(home):
    # fluid 1.8.5's own reader fails on Python 3 (member names formatted from bytes)
    assert all(str(v).startswith("KeyError") for _, v in ORACLE["voc2012"]["dict"])
    got = {split: list(getattr(spmd.dataset.voc2012, split)()())
           for split in ("train", "test", "val")}
    assert_same(json.loads(json.dumps(canon(got))), ORACLE["voc2012_pil"], "voc2012")
    image_, label = got["val"][0]
    assert image_.dtype == np.uint8 and image_.ndim == 3 and label.ndim == 2
    assert set(np.unique(label)) <= {0, 1, 15, 20, 255}


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
def test_flowers_threaded_mapping_gives_the_same_samples(home):
    ordered = list(spmd.dataset.flowers.test(use_xmap=False)())
    threaded = list(spmd.dataset.flowers.test()())
    key = lambda s: (s[1], s[0].sum())  # noqa: E731 - xmap does not keep the order (fluid)
    assert [k for k in sorted(map(key, ordered))] == [k for k in sorted(map(key, threaded))]
    assert ordered[0][0].shape == (3 * 224 * 224,) and ordered[0][0].dtype == np.float32


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
def test_flowers_cycle_starts_over(home):
    reader = spmd.dataset.flowers.valid(mapper=lambda s: s[1], use_xmap=False)
    assert list(reader()) == [8]  # image 5, label 9 - 1
    cycled = spmd.dataset.flowers.train(mapper=lambda s: s[1], use_xmap=False, cycle=True)()
    # the 'tstid' images 2, 6, 4 in archive order: labels 102, 30, 55 less one
    assert [next(cycled) for _ in range(7)] == [101, 29, 54, 101, 29, 54, 101]


def test_flowers_mat_file_without_the_split_is_named(tmp_path, monkeypatch):
    import scipy.io

    folder = tmp_path / "flowers"
    write_more(str(tmp_path))
    scipy.io.savemat(str(folder / "setid.mat"), {"other": np.array([[1]])})
    monkeypatch.setattr(spmd.dataset.common, "DATA_HOME", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetMD5Warning)
        with pytest.raises(InvalidArgumentError, match="no variable 'tstid'.*'other'"):
            spmd.dataset.flowers.train()


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
def test_sentiment_reads_the_unpacked_folder_as_the_zip(home, tmp_path, monkeypatch):
    import zipfile

    with zipfile.ZipFile(home / "corpora" / "movie_reviews.zip") as z:
        z.extractall(tmp_path / "corpora")
    monkeypatch.setattr(spmd.dataset.common, "DATA_HOME", str(tmp_path))
    got = json.loads(json.dumps(canon(list(spmd.dataset.sentiment.train()))))
    assert got == ORACLE["sentiment_train"]


def test_missing_files_name_the_file_url_and_md5(tmp_path, monkeypatch):
    monkeypatch.setattr(spmd.dataset.common, "DATA_HOME", str(tmp_path))
    cases = [(spmd.dataset.flowers.train, "102flowers.tgz"),
             (spmd.dataset.voc2012.val, "VOCtrainval_11-May-2012.tar"),
             (spmd.dataset.sentiment.get_word_dict, "movie_reviews.zip"),
             (lambda: next(spmd.dataset.mq2007.train()), "MQ2007.rar")]
    for call, name in cases:
        with pytest.raises(PreconditionError, match="never downloads") as info:
            call()
        assert name in str(info.value) and "md5" in str(info.value)


def test_mq2007_without_its_text_files_says_how_to_unpack(tmp_path, monkeypatch):
    try:
        import rarfile  # noqa: F401
        pytest.skip("rarfile is installed here: spmd would try to unpack with it")
    except ImportError:
        pass
    folder = tmp_path / "MQ2007"
    folder.mkdir()
    (folder / "7b6dbbe2-842c-11e4-a536-bcaec51b9163_MQ2007.rar").write_bytes(b"Rar!\x1a\x07\x00")
    monkeypatch.setattr(spmd.dataset.common, "DATA_HOME", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetMD5Warning)
        with pytest.raises(PreconditionError, match="unrar x") as info:
            list(spmd.dataset.mq2007.test(format="listwise"))
    assert "MQ2007/MQ2007/MQ2007/Fold1/test.txt" in str(info.value)


def test_mq2007_skips_malformed_lines_with_a_warning(tmp_path, monkeypatch):
    # fluid 1.8.5 raises NameError there (its mq2007 module does not import sys)
    write_more(str(tmp_path))
    path = tmp_path / "MQ2007" / "MQ2007" / "MQ2007" / "Fold1" / "train.txt"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + ["1 qid:10 1:0.5 #too short\n"] + lines[2:]))
    monkeypatch.setattr(spmd.dataset.common, "DATA_HOME", str(tmp_path))
    with pytest.warns(UserWarning, match="skipped 1 line"):
        got = list(spmd.dataset.mq2007.train(format="pairwise"))
    assert json.loads(json.dumps(canon(got))) == ORACLE["mq2007_pairwise_train"]
    with pytest.raises(InvalidArgumentError, match="format must be one of"):
        list(spmd.dataset.mq2007.train(format="rowwise"))


# -- image helpers ---------------------------------------------------------------------------
def test_colour_png_read_as_gray_is_within_one_level_of_opencv(own_code):
    got = CASES["image_decode_gray"](spmd.dataset)
    for key, value in ORACLE["image_decode_gray"]["dict"]:
        want = np.asarray(value["ndarray"]["data"]).reshape(value["ndarray"]["shape"])
        assert got[key].dtype == np.uint8 and got[key].shape == want.shape, key
        assert np.abs(got[key].astype(int) - want).max() <= 1, key


def test_jpeg_without_a_decoder_names_what_to_install(own_code):
    with pytest.raises(PreconditionError, match="opencv-python-headless.*Pillow"):
        image.load_image_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")


def test_png_decoder_refuses_interlaced_and_damaged_files(own_code):
    good = png_cases()["rgb8"]
    interlaced = bytearray(good)
    interlaced[28] = 1  # IHDR's interlace byte (the CRC is not checked)
    with pytest.raises(InvalidArgumentError, match="interlaced"):
        image.load_image_bytes(bytes(interlaced))
    with pytest.raises(InvalidArgumentError, match="truncated|damaged"):
        image.load_image_bytes(good[:60])
    with pytest.raises(InvalidArgumentError, match="not a PNG"):
        spmd.dataset._png.read_png(b"GIF89a")


def test_png_round_trip_of_a_large_image(own_code):
    rng = np.random.RandomState(0)
    rgb = rng.randint(0, 256, (40, 33, 3)).astype(np.uint8)
    np.testing.assert_array_equal(image.load_image_bytes(png_bytes(rgb, 2)), rgb[:, :, ::-1])


def test_load_image_reads_a_file_and_names_a_missing_one(tmp_path, own_code):
    path = tmp_path / "cat.png"
    path.write_bytes(png_cases()["gray8"])
    assert image.load_image(str(path), is_color=False).ndim == 2
    assert image.load_and_transform(str(path), 8, 6, False).shape == (3, 6, 6)
    with pytest.raises(InvalidArgumentError, match="cannot read the image file"):
        image.load_image(str(tmp_path / "dog.jpg"))


def test_image_argument_errors():
    im = np.zeros((10, 12, 3), np.uint8)
    with pytest.raises(InvalidArgumentError, match="exceeds the image"):
        image.random_crop(im, 11)
    with pytest.raises(InvalidArgumentError, match="order"):
        image.to_chw(im, (1, 0))
    with pytest.raises(InvalidArgumentError, match="HWC"):
        image.resize_short([[1, 2]], 4)
    with pytest.raises(InvalidArgumentError, match="element-wise mean"):
        image.simple_transform(im, 8, 6, False, mean=np.zeros((2, 2, 2)))


def test_batch_images_from_tar_writes_fluids_batches(home, tmp_path):
    import shutil

    tgz = tmp_path / "102flowers.tgz"
    shutil.copy(home / "flowers" / "102flowers.tgz", tgz)
    wanted = {"jpg/image_00001.jpg": 7, "jpg/image_00003.jpg": 1, "jpg/image_00004.jpg": 55}
    meta = image.batch_images_from_tar(str(tgz), "trnid", wanted, num_per_batch=2)
    assert meta == str(tmp_path / "102flowers.tgz_batch" / "trnid.txt")
    files = open(meta).read().split()
    assert [os.path.basename(f) for f in files] == ["batch_0", "batch_1"]
    batches = []
    for name in files:
        with open(name, "rb") as f:
            batches.append(restricted_load(f, name, encoding="bytes"))
    # archive order: images 1, 3, then 4
    assert [b["label"] for b in batches] == [[7, 1], [55]]
    assert all(d.startswith(b"\x89PNG") for b in batches for d in b["data"])
    assert image.batch_images_from_tar(str(tgz), "trnid", {}) == meta  # done once
    for name in files:  # pickle protocol 2, as fluid 1.8 writes them (Python 2 can read it)
        assert pathlib.Path(name).read_bytes()[:2] == b"\x80\x02", name
