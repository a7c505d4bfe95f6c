"""paddle.dataset.voc2012: PASCAL VOC 2012 segmentation from Paddle's cache folder
(DATA_HOME/voc2012/VOCtrainval_11-May-2012.tar).

Each sample is (image, label): the JPEG as an H x W x 3 RGB uint8 array and its segmentation
PNG as an H x W uint8 array of class indices (0 background, 1..20 classes, 255 border), as
numpy.array(PIL.Image.open(...)) gives them; in the order of the split's list file
(ImageSets/Segmentation/<split>.txt). As in fluid, train() is the 'trainval' list, test() the
'train' list and val() the 'val' list.

Decoding: the PNG labels by spmd's own reader (or Pillow); the JPEGs need Pillow or OpenCV
(see spmd.dataset.image). Note: fluid 1.8.5's reader fails on Python 3 (it formats the bytes
read from the list file into member names, "b'2007_000032'", and raises KeyError); spmd reads
the names as text.

>>> import spmd as paddle
>>> image, label = next(paddle.dataset.voc2012.val()())   # doctest: +SKIP
"""
from __future__ import annotations

from ..errors import InvalidArgumentError
from . import common
from .image import decode_as_pil

__all__ = ["fetch", "test", "train", "val"]

VOC_URL = "http://host.robots.ox.ac.uk/pascal/VOC/voc2012/VOCtrainval_11-May-2012.tar"
VOC_MD5 = "6cd6e144f989b92b3379bac3b3de84fd"
SET_FILE = "VOCdevkit/VOC2012/ImageSets/Segmentation/{}.txt"
DATA_FILE = "VOCdevkit/VOC2012/JPEGImages/{}.jpg"
LABEL_FILE = "VOCdevkit/VOC2012/SegmentationClass/{}.png"
CACHE_DIR = "voc2012"


def reader_creator(filename: str, sub_name: str):
    """A reader of (RGB image, class-index label) for the ids listed in the split `sub_name`.

    >>> reader = reader_creator("VOCtrainval_11-May-2012.tar", "val")   # doctest: +SKIP
    """
    def reader():
        with common.open_tar(filename) as tar:
            members = {m.name: m for m in tar.getmembers()}

            def read(name: str) -> bytes:
                if name not in members:
                    raise InvalidArgumentError(
                        f"the archive {filename} has no member {name}; it is not the VOC2012 "
                        "trainval archive Paddle expects: copy the original file")
                return tar.extractfile(members[name]).read()

            listing = read(SET_FILE.format(sub_name)).decode("utf-8")
            for line in listing.splitlines():
                ident = line.strip()
                if not ident:
                    continue
                data = decode_as_pil(read(DATA_FILE.format(ident)))
                label = decode_as_pil(read(LABEL_FILE.format(ident)))
                yield data, label

    return reader


def _archive() -> str:
    return common.download(VOC_URL, CACHE_DIR, VOC_MD5)


def train():
    """The 'trainval' split (2913 images).

    >>> import spmd
    >>> reader = spmd.dataset.voc2012.train()   # doctest: +SKIP
    """
    return reader_creator(_archive(), "trainval")


def test():
    """The 'train' split (1464 images), fluid's test reader.

    >>> import spmd
    >>> reader = spmd.dataset.voc2012.test()   # doctest: +SKIP
    """
    return reader_creator(_archive(), "train")


def val():
    """The 'val' split (1449 images).

    >>> import spmd
    >>> reader = spmd.dataset.voc2012.val()   # doctest: +SKIP
    """
    return reader_creator(_archive(), "val")


def fetch():
    """Check that the VOC2012 archive is in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.voc2012.fetch()   # doctest: +SKIP
    """
    _archive()
