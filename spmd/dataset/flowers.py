"""paddle.dataset.flowers: Oxford 102 Flowers from Paddle's cache folder (DATA_HOME/flowers):
102flowers.tgz (the JPEGs), imagelabels.mat (one label per image, 1..102) and setid.mat (which
images are in which split), the .mat files read with scipy.io.loadmat.

Each sample, through the default mappers, is (image, label): the image decoded (BGR), its
short side resized to 256, cropped to 224 x 224 (random crop and flip for train, centre crop
otherwise), CHW, minus the mean [103.94, 116.78, 123.68], flattened to float32[150528]; the
label an int in [0, 101]. As in fluid, train() reads the 'tstid' split (the larger one) and
test() the 'trnid' split. Decoding JPEG needs OpenCV or Pillow (see spmd.dataset.image);
`mapper=` may replace the default (it receives (jpeg bytes, label)).

Unlike fluid, the archive is read directly at every pass instead of being re-packed once into
pickle batch files beside it (`102flowers.tgz_batch/`); the samples come in archive order, which
is fluid's order when its batch files are listed in order. As in fluid, use_xmap=True maps with
4 threads and does not keep the order.

>>> import spmd as paddle
>>> reader = paddle.dataset.flowers.train(use_xmap=False)   # doctest: +SKIP
"""
from __future__ import annotations

import functools
from multiprocessing import cpu_count

from ..errors import InvalidArgumentError
from ..reader import map_readers, xmap_readers
from . import common
from .image import load_image_bytes, simple_transform

__all__ = ["fetch", "test", "train", "valid"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/flowers/102flowers.tgz"
LABEL_URL = "http://paddlemodels.bj.bcebos.com/flowers/imagelabels.mat"
SETID_URL = "http://paddlemodels.bj.bcebos.com/flowers/setid.mat"
DATA_MD5 = "52808999861908f626f3c1f4e79d11fa"
LABEL_MD5 = "e0620be6f572b9609742df49c70aed4d"
SETID_MD5 = "a5357ecc9cb78c4bef273ce3793fc85c"
# the official readme's train and test splits are swapped in fluid (the test split is larger)
TRAIN_FLAG = "tstid"
TEST_FLAG = "trnid"
VALID_FLAG = "valid"
MEAN = [103.94, 116.78, 123.68]


def default_mapper(is_train: bool, sample):
    """(jpeg bytes, label) -> (float32[3*224*224] image, label); see the module docstring.

    >>> image, label = default_mapper(False, (jpeg_bytes, 3))   # doctest: +SKIP
    """
    img, label = sample
    img = simple_transform(load_image_bytes(img), 256, 224, is_train, mean=MEAN)
    return img.flatten().astype("float32"), label


train_mapper = functools.partial(default_mapper, True)
test_mapper = functools.partial(default_mapper, False)


def _mat_field(path: str, key: str):
    import scipy.io

    try:
        mat = scipy.io.loadmat(path)
    except Exception as exc:  # noqa: BLE001 - scipy raises several types for a bad file
        raise InvalidArgumentError(
            f"cannot read the MATLAB file {path}: {exc}. The file is damaged or truncated; "
            "copy the original file again") from None
    if key not in mat:
        shown = sorted(k for k in mat if not k.startswith("__"))
        raise InvalidArgumentError(
            f"the MATLAB file {path} has no variable {key!r} (it has {shown}); it is not the "
            "flowers file Paddle expects")
    return mat[key][0]


def _image_labels(label_file: str, setid_file: str, dataset_name: str) -> dict:
    """Archive member name -> label (1..102) of the images in the split `dataset_name`."""
    labels = _mat_field(label_file, "labels")
    indexes = _mat_field(setid_file, dataset_name)
    out = {}
    for i in indexes:
        if not 1 <= int(i) <= len(labels):
            raise InvalidArgumentError(
                f"{setid_file}: split {dataset_name!r} names image {int(i)} but {label_file} "
                f"labels images 1..{len(labels)}")
        out[f"jpg/image_{int(i):05d}.jpg"] = labels[int(i) - 1]
    return out


def reader_creator(data_file: str, label_file: str, setid_file: str, dataset_name: str,
                   mapper, buffered_size: int = 1024, use_xmap: bool = True,
                   cycle: bool = False):
    """A reader of (mapper applied to) (image bytes, label - 1) for the images of the split
    `dataset_name` ('tstid', 'trnid' or 'valid'), in archive order; forever with cycle=True.

    >>> reader = reader_creator(tgz, labels_mat, setid_mat, "valid", test_mapper)  # doctest: +SKIP
    """
    img2label = _image_labels(label_file, setid_file, dataset_name)

    def reader():
        while True:
            with common.open_tar(data_file) as tar:
                for member in tar:
                    if member.name in img2label:
                        data = tar.extractfile(member).read()
                        yield data, int(img2label[member.name]) - 1
            if not cycle:
                break

    if use_xmap:
        return xmap_readers(mapper, reader, min(4, cpu_count()), buffered_size)
    return map_readers(mapper, reader)


def _files():
    return (common.download(DATA_URL, "flowers", DATA_MD5),
            common.download(LABEL_URL, "flowers", LABEL_MD5),
            common.download(SETID_URL, "flowers", SETID_MD5))


def train(mapper=train_mapper, buffered_size: int = 1024, use_xmap: bool = True,
          cycle: bool = False):
    """The training reader (fluid's 'tstid' split), augmented by `mapper`.

    >>> import spmd
    >>> reader = spmd.dataset.flowers.train()   # doctest: +SKIP
    """
    return reader_creator(*_files(), TRAIN_FLAG, mapper, buffered_size, use_xmap, cycle=cycle)


def test(mapper=test_mapper, buffered_size: int = 1024, use_xmap: bool = True,
         cycle: bool = False):
    """The test reader (fluid's 'trnid' split), centre-cropped by `mapper`.

    >>> import spmd
    >>> reader = spmd.dataset.flowers.test()   # doctest: +SKIP
    """
    return reader_creator(*_files(), TEST_FLAG, mapper, buffered_size, use_xmap, cycle=cycle)


def valid(mapper=test_mapper, buffered_size: int = 1024, use_xmap: bool = True):
    """The validation reader ('valid' split), centre-cropped by `mapper`.

    >>> import spmd
    >>> reader = spmd.dataset.flowers.valid()   # doctest: +SKIP
    """
    return reader_creator(*_files(), VALID_FLAG, mapper, buffered_size, use_xmap)


def fetch():
    """Check that the three flowers files are in the cache folder (spmd never downloads).

    >>> import spmd
    >>> spmd.dataset.flowers.fetch()   # doctest: +SKIP
    """
    _files()
