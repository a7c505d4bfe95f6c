"""paddle.dataset.image: fluid 1.8's image helpers for data readers: decode, resize the short
side, crop (center or random), flip, transpose HWC -> CHW, subtract a mean.

Images are numpy arrays in HWC layout, colour ones in OpenCV's BGR order, as fluid (which uses
OpenCV) gives them. Everything but decoding is numpy:
- decoding uses OpenCV when it is installed (`pip install opencv-python-headless`; fluid's
  module needs it too), else spmd's own decoder for PNG, else Pillow (converted to BGR); a
  JPEG with neither library installed raises an error naming what to install. spmd does not
  depend on either package: data set readers that decode JPEG (flowers, voc2012) need one.
- resize_short uses OpenCV when installed, else spmd's numpy copy of OpenCV 4.2's bicubic
  resize (fluid 1.8.5's; identical for uint8 images, see spmd/dataset/_resize.py, and about
  60 ms for a 500 x 375 image). OpenCV 5 resizes slightly differently (by at most one level on
  a few percent of the pixels): leave it out of BACKENDS for fluid 1.8.5's exact numbers.
random_crop and simple_transform draw from numpy's global generator as fluid does, so
`np.random.seed(n)` gives fluid's crops and flips.

`BACKENDS` lists the optional libraries spmd may use, in order of preference; set it to () to
use only spmd's own code (PNG decoding, numpy resize), e.g. for results that do not depend on
what is installed.

>>> import numpy as np
>>> im = np.zeros((300, 400, 3), np.uint8)
>>> simple_transform(im, 256, 224, is_train=False, mean=[103.94, 116.78, 123.68]).shape
(3, 224, 224)
"""
from __future__ import annotations

import builtins
import io
import os
import pickle
import tarfile

import numpy as np

from ..errors import InvalidArgumentError, PreconditionError
from ._png import SlowPNG, decode_png_cv2, is_png, read_png
from ._resize import resize_cubic

__all__ = ["batch_images_from_tar", "center_crop", "left_right_flip", "load_and_transform",
           "load_image", "load_image_bytes", "random_crop", "resize_short", "simple_transform",
           "to_chw"]

BACKENDS = ("cv2", "PIL")
_MISSING = object()
_modules: dict = {}


def _optional(name: str):
    """The module `name` (cv2, PIL.Image) if BACKENDS allows it and it imports, else None."""
    if name.split(".")[0] not in BACKENDS:
        return None
    module = _modules.get(name, _MISSING)
    if module is _MISSING:
        try:
            module = __import__(name, fromlist=["_"])
        except Exception:  # noqa: BLE001 - a broken install counts as absent
            module = None
        _modules[name] = module
    return module


def _no_decoder(what: str) -> PreconditionError:
    return PreconditionError(
        f"paddle.dataset.image: cannot decode {what}: neither OpenCV (cv2) nor Pillow is "
        f"installed (or spmd.dataset.image.BACKENDS = {BACKENDS!r} leaves them out), and spmd "
        "decodes only PNG by itself. fluid's image module decodes with "
        "OpenCV; install it (pip install opencv-python-headless) or Pillow (pip install "
        "Pillow)")


def load_image_bytes(bytes, is_color: bool = True) -> np.ndarray:  # noqa: A002 - fluid's name
    """Decode an encoded image (JPEG, PNG, ...): H x W x 3 BGR uint8, or H x W gray with
    is_color=False, as cv2.imdecode.

    >>> from spmd.dataset._png import PNG_SIGNATURE
    >>> load_image_bytes(b"GIF89a...")   # doctest: +SKIP
    """
    data = builtins.bytes(bytes)  # bytes, bytearray or a buffer such as a uint8 array
    cv2 = _optional("cv2")
    if cv2 is not None:
        img = cv2.imdecode(np.frombuffer(data, np.uint8), 1 if is_color else 0)
        if img is None:
            raise InvalidArgumentError(
                f"load_image_bytes: OpenCV cannot decode these {len(data)} bytes (first bytes "
                f"{data[:8]!r}); they are not an image file, or a damaged one")
        return img
    image = _optional("PIL.Image")
    if is_png(data):  # spmd's reader follows OpenCV for PNG (16-bit files too), Pillow not
        try:
            return decode_png_cv2(data, is_color)
        except SlowPNG:
            if image is None:
                raise
    if image is not None:
        try:
            pic = image.open(io.BytesIO(data))
            if is_color:
                return np.ascontiguousarray(np.asarray(pic.convert("RGB"))[:, :, ::-1])
            return np.asarray(pic.convert("L"))
        except OSError as exc:
            raise InvalidArgumentError(
                f"load_image_bytes: Pillow cannot decode these {len(data)} bytes: {exc}") from None
    raise _no_decoder(f"these {len(data)} bytes (first bytes {data[:8]!r}; only PNG is "
                      "decoded without a library)")


def load_image(file: str, is_color: bool = True) -> np.ndarray:
    """Read and decode the image file `file` (see load_image_bytes).

    >>> im = load_image("cat.jpg")   # doctest: +SKIP
    """
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InvalidArgumentError(f"load_image: cannot read the image file {file!r}: {exc}") \
            from None
    return load_image_bytes(data, is_color)


def _check_image(im, where: str, min_dims: int = 2) -> np.ndarray:
    if not isinstance(im, np.ndarray) or im.ndim < min_dims:
        shape = getattr(im, "shape", None)
        raise InvalidArgumentError(
            f"{where}: expected an image array in HWC (or HW) layout, got "
            f"{type(im).__name__} with shape {shape}")
    return im


def resize_short(im: np.ndarray, size: int) -> np.ndarray:
    """Resize (bicubic) so that the shorter side is `size`, keeping the aspect ratio (the
    other side is size * long // short, as fluid computes it).

    >>> import numpy as np
    >>> resize_short(np.zeros((300, 400, 3), np.uint8), 256).shape
    (256, 341, 3)
    """
    im = _check_image(im, "resize_short")
    h, w = im.shape[:2]
    h_new, w_new = size, size
    if h > w:
        h_new = size * h // w
    else:
        w_new = size * w // h
    cv2 = _optional("cv2")
    if cv2 is not None:
        return cv2.resize(im, (w_new, h_new), interpolation=cv2.INTER_CUBIC)
    return resize_cubic(im, w_new, h_new)


def to_chw(im: np.ndarray, order=(2, 0, 1)) -> np.ndarray:
    """Transpose an HWC image to CHW (or to `order`).

    >>> import numpy as np
    >>> to_chw(np.zeros((4, 5, 3))).shape
    (3, 4, 5)
    """
    im = _check_image(im, "to_chw", 1)
    if len(im.shape) != len(order):
        raise InvalidArgumentError(
            f"to_chw: order {tuple(order)} has {len(order)} axes but the image has "
            f"{im.ndim} (shape {im.shape})")
    return im.transpose(order)


def _crop(im, h_start, w_start, size, is_color):
    if is_color:
        return im[h_start:h_start + size, w_start:w_start + size, :]
    return im[h_start:h_start + size, w_start:w_start + size]


def center_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """The size x size square at the centre of the image.

    >>> import numpy as np
    >>> center_crop(np.zeros((256, 341, 3)), 224).shape
    (224, 224, 3)
    """
    im = _check_image(im, "center_crop")
    h, w = im.shape[:2]
    return _crop(im, (h - size) // 2, (w - size) // 2, size, is_color)


def random_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """A size x size square at a random place (numpy's global generator, as fluid).

    >>> import numpy as np
    >>> random_crop(np.zeros((256, 341, 3)), 224).shape
    (224, 224, 3)
    """
    im = _check_image(im, "random_crop")
    h, w = im.shape[:2]
    if size > h or size > w:
        raise InvalidArgumentError(
            f"random_crop: crop size {size} exceeds the image's {h} x {w}; resize first "
            "(resize_short(im, size))")
    h_start = np.random.randint(0, h - size + 1)
    w_start = np.random.randint(0, w - size + 1)
    return _crop(im, h_start, w_start, size, is_color)


def left_right_flip(im: np.ndarray, is_color: bool = True) -> np.ndarray:
    """The image mirrored left to right.

    >>> import numpy as np
    >>> left_right_flip(np.arange(6).reshape(2, 3)).tolist()
    [[2, 1, 0], [5, 4, 3]]
    """
    im = _check_image(im, "left_right_flip")
    if len(im.shape) == 3 and is_color:
        return im[:, ::-1, :]
    return im[:, ::-1]


def simple_transform(im: np.ndarray, resize_size: int, crop_size: int, is_train: bool,
                     is_color: bool = True, mean=None) -> np.ndarray:
    """fluid's augmentation: resize the short side to resize_size; then in training a random
    crop and, with probability 1/2, a flip, else a center crop; CHW float32; minus `mean`
    (one value per channel, or element-wise).

    >>> import numpy as np
    >>> simple_transform(np.zeros((64, 80, 3), np.uint8), 32, 28, True).dtype
    dtype('float32')
    """
    im = resize_short(im, resize_size)
    if is_train:
        im = random_crop(im, crop_size, is_color=is_color)
        if np.random.randint(2) == 0:
            im = left_right_flip(im, is_color)
    else:
        im = center_crop(im, crop_size, is_color=is_color)
    if len(im.shape) == 3:
        im = to_chw(im)
    im = im.astype("float32")
    if mean is not None:
        mean = np.array(mean, dtype=np.float32)
        if mean.ndim == 1 and is_color:
            mean = mean[:, np.newaxis, np.newaxis]  # one value per channel
        elif mean.ndim > 1 and _broadcast(im.shape, mean.shape) != im.shape:
            raise InvalidArgumentError(
                f"simple_transform: an element-wise mean must fit the cropped image's shape "
                f"{im.shape} (CHW), got {mean.shape}")
        im -= mean
    return im


def _broadcast(a: tuple, b: tuple):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return None


def load_and_transform(filename: str, resize_size: int, crop_size: int, is_train: bool,
                       is_color: bool = True, mean=None) -> np.ndarray:
    """load_image(filename) then simple_transform.

    >>> im = load_and_transform("cat.jpg", 256, 224, True)   # doctest: +SKIP
    """
    im = load_image(filename, is_color)
    return simple_transform(im, resize_size, crop_size, is_train, is_color, mean)


def batch_images_from_tar(data_file: str, dataset_name: str, img2label: dict,
                          num_per_batch: int = 1024) -> str:
    """fluid's batching of a tar of images: the members named in `img2label`, in archive order,
    written num_per_batch at a time as pickles {'label': [...], 'data': [bytes, ...]} to
    `<data_file>_batch/<dataset_name>/batch_<n>`; returns the list file
    `<data_file>_batch/<dataset_name>.txt` naming them. Done once: an existing folder is kept.
    (spmd's flowers reader reads the tar directly and does not need these files.)

    >>> meta = batch_images_from_tar("102flowers.tgz", "trnid", {})   # doctest: +SKIP
    """
    batch_dir = data_file + "_batch"
    out_path = os.path.join(batch_dir, dataset_name)
    meta_file = os.path.join(batch_dir, dataset_name + ".txt")
    if os.path.exists(out_path):
        return meta_file
    os.makedirs(out_path)
    names = []

    def dump(data, labels):
        name = os.path.abspath(os.path.join(out_path, f"batch_{len(names)}"))
        with open(name, "wb") as f:  # plain lists of bytes and ints: writing pickle is safe
            pickle.dump({"label": labels, "data": data}, f, protocol=2)
        names.append(name)

    data, labels = [], []
    with tarfile.open(data_file) as tar:
        for member in tar:
            if member.name in img2label:
                data.append(tar.extractfile(member).read())
                labels.append(img2label[member.name])
                if len(data) == num_per_batch:
                    dump(data, labels)
                    data, labels = [], []
    if data:
        dump(data, labels)
    with open(meta_file, "a") as meta:
        meta.writelines(name + "\n" for name in names)
    return meta_file


def decode_as_pil(data: bytes) -> np.ndarray:
    """np.array(PIL.Image.open(data)): RGB colour images, palette PNGs as their indices (what
    voc2012 yields). Pillow when installed, else PNG by spmd's reader, else OpenCV (BGR turned
    to RGB)."""
    image = _optional("PIL.Image")
    if image is not None:
        return np.array(image.open(io.BytesIO(data)))
    if is_png(data):
        return read_png(data)
    cv2 = _optional("cv2")
    if cv2 is None:
        raise _no_decoder(f"a {len(data)}-byte image (first bytes {data[:8]!r})")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), -1)  # IMREAD_UNCHANGED
    if img is None:
        raise InvalidArgumentError(f"OpenCV cannot decode these {len(data)} bytes")
    if img.ndim == 3:
        order = [2, 1, 0] + ([3] if img.shape[2] == 4 else [])
        img = img[:, :, order]
    return np.ascontiguousarray(img)
