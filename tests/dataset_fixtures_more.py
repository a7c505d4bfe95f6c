"""Tiny files for the data sets and image helpers added late to spmd.dataset (flowers, voc2012,
sentiment, mq2007, image), in the formats Paddle reads, and the cases both the oracle
(tests/oracle/make_dataset_more.py, PaddlePaddle 1.8.5 with OpenCV 4.2 and Pillow) and
tests/unit/test_dataset_more.py (spmd) run on them; see tests/dataset_fixtures.py for the
pattern. The "JPEG" images are PNG files (decoders look at the content, not the name), so spmd
decodes them without OpenCV or Pillow. This file runs on Python 3.7 and on the project's Python.
"""
import io
import os
import struct
import zipfile
import zlib

import numpy as np
from dataset_fixtures import _folder, _tar

SEED = 20261125
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


# ----------------------------------------------------------------------------- PNG writer

def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _filter_row(kind, line, prev, bpp):
    out = bytearray(len(line))
    for i, value in enumerate(line):
        left = line[i - bpp] if i >= bpp else 0
        up_left = prev[i - bpp] if i >= bpp else 0
        pred = [0, left, prev[i], (left + prev[i]) >> 1, _paeth(left, prev[i], up_left)][kind]
        out[i] = (value - pred) & 0xFF
    return bytes(out)


def _chunk(kind, body):
    return (struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


def png_bytes(arr, color_type, depth=8, palette=None):
    """`arr` (H x W or H x W x C samples) as a PNG file; rows use the five filters in turn."""
    arr = np.asarray(arr)
    height, width = arr.shape[:2]
    channels = _CHANNELS[color_type]
    samples = arr.reshape(height, width * channels)
    if depth == 16:
        rows = samples.astype(">u2").view(np.uint8).reshape(height, -1)
    elif depth == 8:
        rows = samples.astype(np.uint8)
    else:
        bits = ((samples[:, :, None] >> np.arange(depth - 1, -1, -1)) & 1).astype(np.uint8)
        rows = np.packbits(bits.reshape(height, -1), axis=1)
    bpp = max(1, channels * depth // 8)
    raw, prev = [], bytes(rows.shape[1])
    for y in range(height):
        line = rows[y].tobytes()
        raw.append(bytes([y % 5]) + _filter_row(y % 5, line, prev, bpp))
        prev = line
    out = [b"\x89PNG\r\n\x1a\n",
           _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0))]
    if palette is not None:
        out.append(_chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes()))
    out.append(_chunk(b"IDAT", zlib.compress(b"".join(raw), 9)))
    out.append(_chunk(b"IEND", b""))
    return b"".join(out)


def _image(r, h, w, channels=3):
    """A smooth colour image with noise: resizing it exercises the cubic kernel fully."""
    y, x = np.mgrid[0:h, 0:w]
    base = [np.sin(x * 0.3 + c) * 60 + np.cos(y * 0.2 - c) * 50 + 128 for c in range(channels)]
    img = np.stack(base, axis=-1) + r.randint(-20, 21, (h, w, channels))
    return np.clip(img, 0, 255).astype(np.uint8)


PALETTE = np.array([[i * 7 % 256, i * 13 % 256, i * 29 % 256] for i in range(256)], np.uint8)


def png_cases():
    """name -> PNG bytes of every colour type and bit depth the decoders handle."""
    r = np.random.RandomState(SEED)
    rgb = _image(r, 9, 7)
    gray = _image(r, 6, 11, 1)[:, :, 0]
    return {
        "rgb8": png_bytes(rgb, 2),
        "rgb16": png_bytes(rgb.astype(np.uint16) * 257 + r.randint(0, 256, rgb.shape), 2, 16),
        "rgba8": png_bytes(np.concatenate([rgb, rgb[:, :, :1]], axis=2), 6),
        "gray8": png_bytes(gray, 0),
        "gray16": png_bytes(gray.astype(np.uint16) * 256 + 77, 0, 16),
        "gray4": png_bytes(gray >> 4, 0, 4),
        "gray2": png_bytes(gray >> 6, 0, 2),
        "gray1": png_bytes(gray >> 7, 0, 1),
        "graya8": png_bytes(np.stack([gray, 255 - gray], axis=2), 4),
        "pal8": png_bytes(r.randint(0, 256, (5, 9)), 3, 8, PALETTE),
        "pal4": png_bytes(r.randint(0, 16, (5, 9)), 3, 4, PALETTE[:16]),
        "pal1": png_bytes(r.randint(0, 2, (4, 13)), 3, 1, PALETTE[:2]),
    }


# ----------------------------------------------------------------------------- writers

FLOWER_SPLITS = {"trnid": [3, 1], "valid": [5], "tstid": [2, 6, 4]}


def write_flowers(home):
    import scipy.io

    r = np.random.RandomState(SEED + 1)
    folder = _folder(home, "flowers")
    labels = np.array([[7, 102, 1, 55, 9, 30, 4]], np.uint8)  # images 1..7, image 7 unused
    sizes = [(40, 30), (25, 36), (30, 30), (21, 29), (50, 22), (33, 47), (20, 20)]
    members = [("jpg", None)]
    for number in (2, 7, 1, 5, 3, 6, 4):  # archive order differs from the numbering
        h, w = sizes[number - 1]
        members.append((f"jpg/image_{number:05d}.jpg", png_bytes(_image(r, h, w), 2)))
    members.append(("README.txt", b"not an image\n"))
    _tar(os.path.join(folder, "102flowers.tgz"), members)
    scipy.io.savemat(os.path.join(folder, "imagelabels.mat"), {"labels": labels})
    scipy.io.savemat(os.path.join(folder, "setid.mat"),
                     {k: np.array([v], np.uint16) for k, v in FLOWER_SPLITS.items()})


VOC_IDS = {"train": ["2007_000032", "2007_000039"], "val": ["2007_000033"],
           "trainval": ["2007_000032", "2007_000033", "2007_000039"]}


def voc_member_bytes():
    """name -> bytes of the VOC archive's members (also used to compute the expected arrays)."""
    r = np.random.RandomState(SEED + 2)
    root = "VOCdevkit/VOC2012/"
    out = {}
    for split, ids in sorted(VOC_IDS.items()):
        out[root + f"ImageSets/Segmentation/{split}.txt"] = ("\n".join(ids) + "\n").encode()
    for i, ident in enumerate(VOC_IDS["trainval"]):
        h, w = 6 + i, 8 - i
        out[root + f"JPEGImages/{ident}.jpg"] = png_bytes(_image(r, h, w), 2)
        label = r.choice([0, 1, 15, 20, 255], size=(h, w))
        out[root + f"SegmentationClass/{ident}.png"] = png_bytes(label, 3, 8, PALETTE)
    return out


def write_voc2012(home):
    members = sorted(voc_member_bytes().items())
    _tar(os.path.join(_folder(home, "voc2012"), "VOCtrainval_11-May-2012.tar"), members,
         mode="w")


REVIEWS = {
    "neg": ["a dull film , and a long one .\nthe plot is thin ; it's dull .\n",
            "bad acting -- bad script !\n",
            "the film is too long ...\nnot good at all .\n"],
    "pos": ["a good film .\nthe acting is good , the plot is good .\n",
            "it's a fine film ( with a fine cast ) .\n",
            "good good good !!\n"],
}


def write_sentiment(home):
    folder = _folder(home, "corpora")
    with zipfile.ZipFile(os.path.join(folder, "movie_reviews.zip"), "w") as z:
        z.writestr("movie_reviews/README", "the movie review corpus\n")
        for category, texts in sorted(REVIEWS.items()):
            for i, text in enumerate(texts):
                z.writestr(f"movie_reviews/{category}/cv{i:03d}_{100 + i}.txt", text)


def _mq_line(r, relevance, qid, comment=True):
    features = " ".join(f"{i + 1}:{v:.6f}" for i, v in enumerate(r.uniform(0, 1, 46)))
    tail = f" #docid = GX{r.randint(1000):03d} inc = 1 prob = 0.5" if comment else ""
    return f"{relevance} qid:{qid} {features}{tail}\n"


def write_mq2007(home):
    r = np.random.RandomState(SEED + 3)
    folder = os.path.join(home, "MQ2007", "MQ2007", "MQ2007", "Fold1")
    os.makedirs(folder)
    plan = {"train.txt": [(10, [0, 2, 1, 0, 2]), (11, [0, 0]), (12, [1, 0, 1])],
            "test.txt": [(30, [2, 0]), (31, [0, 1, 1, 0])]}
    for name, queries in plan.items():
        lines = []
        for qid, relevances in queries:
            for k, rel in enumerate(relevances):
                lines.append(_mq_line(r, rel, qid, comment=(k != 1)))
        with open(os.path.join(folder, name), "w") as f:
            f.writelines(lines)


def write_more(home):
    """Every tiny file of this module under `home`, laid out as Paddle's cache folder."""
    for write in (write_flowers, write_voc2012, write_sentiment, write_mq2007):
        write(home)


# ----------------------------------------------------------------------------- cases

def _seeded(seed, fn):
    np.random.seed(seed)
    return fn()


def _image_ops(ds):
    r = np.random.RandomState(SEED + 4)
    im = _image(r, 30, 41)
    gray = _image(r, 37, 23, 1)[:, :, 0]
    flt = r.uniform(0, 255, (5, 7)).astype(np.float32)  # small: stored in full (float)
    img = ds.image
    return {
        "resize_up": img.resize_short(im, 64), "resize_down": img.resize_short(im, 17),
        "resize_gray": img.resize_short(gray, 50), "resize_tall": img.resize_short(gray, 12),
        "resize_float": img.resize_short(flt, 6),
        "center": img.center_crop(im, 20), "center_gray": img.center_crop(gray, 9, False),
        "random": _seeded(3, lambda: img.random_crop(im, 25)),
        "random_gray": _seeded(4, lambda: img.random_crop(gray, 15, False)),
        "flip": img.left_right_flip(im), "flip_gray": img.left_right_flip(gray, False),
        "chw": img.to_chw(im), "chw_order": img.to_chw(im, (1, 0, 2)),
        "train": _seeded(5, lambda: [img.simple_transform(im, 32, 28, True,
                                                          mean=[10.0, 20.0, 30.0])
                                     for _ in range(4)]),
        "test": img.simple_transform(im, 32, 28, False, mean=[10.0, 20.0, 30.0]),
        "test_nomean": img.simple_transform(im, 32, 28, False),
        "gray_train": _seeded(6, lambda: img.simple_transform(gray, 20, 16, True, False,
                                                              mean=[5.0])),
    }


def _decoded(ds):
    out = {}
    for name, data in sorted(png_cases().items()):
        out[name] = ds.image.load_image_bytes(data)
        if not name.startswith(("rgb", "pal")):  # gray from colour: libpng's own weights
            out[name + "_gray"] = ds.image.load_image_bytes(data, is_color=False)
    return out


def _decoded_gray_from_colour(ds):
    """Colour PNGs read as gray: libpng's weights in OpenCV (small, so stored in full)."""
    cases = png_cases()
    return {name: ds.image.load_image_bytes(cases[name], is_color=False)
            for name in ("rgb8", "rgba8", "pal8", "pal1")}


def _voc_errors(ds):
    """What the VOC reader gives, or the exception type (fluid 1.8.5 fails on Python 3)."""
    out = {}
    for split in ("train", "test", "val"):
        try:
            out[split] = list(getattr(ds.voc2012, split)()())
        except KeyError as exc:
            out[split] = f"KeyError: {exc}"
    return out


def _mq(ds, which, fmt):
    return list(getattr(ds.mq2007, which)(format=fmt))


CASES = {
    "image_ops": _image_ops,
    "image_decode": _decoded,
    "image_decode_gray": _decoded_gray_from_colour,
    "flowers_train": lambda ds: _seeded(11, lambda: list(ds.flowers.train(use_xmap=False)())),
    "flowers_test": lambda ds: list(ds.flowers.test(use_xmap=False)()),
    "flowers_valid": lambda ds: list(ds.flowers.valid(use_xmap=False)()),
    "flowers_raw": lambda ds: list(ds.flowers.test(mapper=lambda s: s, use_xmap=False)()),
    "sentiment_dict": lambda ds: ds.sentiment.get_word_dict(),
    "sentiment_train": lambda ds: list(ds.sentiment.train()),
    "sentiment_test": lambda ds: list(ds.sentiment.test()),
    "mq2007_pairwise_train": lambda ds: _mq(ds, "train", "pairwise"),
    "mq2007_pointwise_train": lambda ds: _mq(ds, "train", "pointwise"),
    "mq2007_listwise_test": lambda ds: _mq(ds, "test", "listwise"),
    "mq2007_plain_txt_test": lambda ds: _mq(ds, "test", "plain_txt"),
    "voc2012": _voc_errors,
}


def voc_expected_with_pil():
    """What fluid's voc2012 reader would yield had it found the members: PIL's arrays."""
    from PIL import Image

    members = voc_member_bytes()
    root = "VOCdevkit/VOC2012/"
    out = {}
    for name, split in (("train", "trainval"), ("test", "train"), ("val", "val")):
        samples = []
        for ident in VOC_IDS[split]:
            data = members[root + f"JPEGImages/{ident}.jpg"]
            label = members[root + f"SegmentationClass/{ident}.png"]
            samples.append((np.array(Image.open(io.BytesIO(data))),
                            np.array(Image.open(io.BytesIO(label)))))
        out[name] = samples
    return out
