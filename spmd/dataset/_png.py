"""A small PNG decoder (the standard library's zlib and numpy), so that paddle.dataset.image and
voc2012 read PNG files without OpenCV or Pillow. JPEG needs one of those (see image.py).

`read_png(data)` gives the image in the file's own layout, as numpy.array(PIL.Image.open(f))
does for the common modes: palette images as their indices (VOC's segmentation labels), gray
as H x W, gray + alpha as H x W x 2, RGB(A) as H x W x 3(4). `decode_png_cv2(data, is_color)`
gives what cv2.imdecode(data, 1 or 0) gives: BGR uint8 (alpha dropped, palettes expanded) or
gray uint8; 16-bit samples keep their high byte, as OpenCV's 8-bit reads do. Interlaced
(Adam7) files are refused with a clear error.

>>> read_png(b"not a png")
Traceback (most recent call last):
spmd.errors.InvalidArgumentError: not a PNG file (its first bytes are b'not a pn')
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["MAX_PIXELS", "PNG_SIGNATURE", "SlowPNG", "decode_png_cv2", "is_png", "read_png"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
# Pillow's decompression-bomb limit: a header asking for more pixels is refused, as a huge
# image from a few bytes of file could otherwise take all memory
MAX_PIXELS = 89_478_485
# rows filtered with Average or Paeth are undone byte by byte in Python: above this many bytes
# of image, such a file is left to OpenCV or Pillow (SlowPNG), instead of taking minutes
MAX_PYTHON_FILTER_BYTES = 4 << 20
# libpng's rgb_to_gray weights (OpenCV asks for 0.299, 0.587) in 1/32768ths
_GRAY_WEIGHTS = (9797, 19234, 32768 - 9797 - 19234)


class SlowPNG(InvalidArgumentError):
    """A PNG this decoder would take too long on (large, Average/Paeth-filtered rows): a
    library decodes it (image.py falls back to Pillow), or the error says to install one."""


def is_png(data: bytes) -> bool:
    """Whether `data` starts with the PNG signature.

    >>> is_png(PNG_SIGNATURE + b"...")
    True
    """
    return bytes(data[:8]) == PNG_SIGNATURE


def _chunks(data: bytes):
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise InvalidArgumentError(f"PNG file truncated inside its {kind!r} chunk")
        yield kind, body
        if kind == b"IEND":
            return
        pos += 12 + length
    raise InvalidArgumentError("PNG file truncated: no IEND chunk")


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    """Undo the per-row filters (none, sub, up, average, paeth) of a non-interlaced image."""
    if len(raw) < height * (stride + 1):
        raise InvalidArgumentError(
            f"PNG image data holds {len(raw)} bytes, expected {height * (stride + 1)}")
    kinds = raw[0:height * (stride + 1):stride + 1]
    if height * stride > MAX_PYTHON_FILTER_BYTES and (3 in kinds or 4 in kinds):
        raise SlowPNG(
            f"a {height * stride}-byte PNG image with Average/Paeth-filtered rows is too large "
            f"for spmd's own PNG reader; install opencv-python-headless or Pillow, which spmd "
            f"then uses")
    out = np.zeros((height, stride), np.uint8)
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1 and stride % bpp == 0:  # a running sum per byte of the pixel, mod 256
            line = bytearray(np.cumsum(np.frombuffer(line, np.uint8).reshape(-1, bpp), axis=0,
                                       dtype=np.uint8).tobytes())
        elif kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((np.frombuffer(line, np.uint8) + np.frombuffer(prev, np.uint8))
                             .astype(np.uint8).tobytes())
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif kind != 0:
            raise InvalidArgumentError(f"PNG row {y} has an unknown filter type {kind}")
        out[y] = np.frombuffer(bytes(line), np.uint8)
        prev = line
    return out


def _samples(rows: np.ndarray, width: int, depth: int, channels: int) -> np.ndarray:
    """Filtered-free rows of bytes -> H x W x channels samples (uint8, or uint16 for 16-bit)."""
    height = rows.shape[0]
    if depth == 16:
        return rows.view(">u2").astype(np.uint16).reshape(height, width, channels)
    if depth == 8:
        return rows.reshape(height, width, channels)
    bits = np.unpackbits(rows, axis=1)  # depth < 8 only for one-sample pixels
    bits = bits[:, :width * depth].reshape(height, width, depth)
    weights = (1 << np.arange(depth - 1, -1, -1)).astype(np.uint8)
    return (bits * weights).sum(axis=2, dtype=np.uint8).reshape(height, width, 1)


def _parse(data: bytes):
    """(samples H x W x C, colour type, bit depth, palette as N x 3 uint8 or None)."""
    if not is_png(data):
        raise InvalidArgumentError(f"not a PNG file (its first bytes are {bytes(data[:8])!r})")
    header, palette, idat = None, None, []
    for kind, body in _chunks(bytes(data)):
        if kind == b"IHDR":
            if len(body) != 13:
                raise InvalidArgumentError(f"PNG IHDR chunk of {len(body)} bytes, expected 13")
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            if not body or len(body) % 3 or len(body) > 3 * 256:
                raise InvalidArgumentError(
                    f"PNG PLTE chunk of {len(body)} bytes: expected 3 to 768, a multiple of 3")
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None:
        raise InvalidArgumentError("PNG file without an IHDR chunk")
    width, height, depth, ctype, _, _, interlace = header
    if ctype not in _CHANNELS or depth not in _DEPTHS[ctype]:
        raise InvalidArgumentError(
            f"PNG colour type {ctype} with bit depth {depth} is not a valid combination")
    if not 0 < width * height <= MAX_PIXELS:
        raise InvalidArgumentError(
            f"PNG header says {width} x {height} pixels: expected 1 to {MAX_PIXELS} (a larger "
            f"image from a file is a decompression bomb or a damaged header)")
    if interlace:
        raise InvalidArgumentError(
            "interlaced (Adam7) PNG files are not decoded by spmd's own PNG reader; install "
            "opencv-python-headless (or Pillow), which spmd then uses")
    if ctype == 3 and palette is None:
        raise InvalidArgumentError("palette PNG without a PLTE chunk")
    channels = _CHANNELS[ctype]
    stride = (width * channels * depth + 7) // 8
    try:  # no more than the header's size is inflated, whatever the data holds
        raw = zlib.decompressobj().decompress(b"".join(idat), height * (stride + 1))
    except zlib.error as exc:
        raise InvalidArgumentError(f"PNG image data is damaged: {exc}") from None
    rows = _unfilter(raw, height, stride, max(1, channels * depth // 8))
    return _samples(rows, width, depth, channels), ctype, depth, palette


def read_png(data: bytes) -> np.ndarray:
    """The image in the file's own layout (see the module docstring): uint8, or uint16 for
    16-bit files; palette images as indices.

    >>> read_png(PNG_SIGNATURE)
    Traceback (most recent call last):
    spmd.errors.InvalidArgumentError: PNG file truncated: no IEND chunk
    """
    samples, ctype, depth, _ = _parse(data)
    if ctype == 0 and depth == 1:
        return samples[:, :, 0].astype(bool)  # PIL's mode "1" reads as bool
    if ctype == 0 and depth < 8:
        samples = samples * np.uint8(255 // ((1 << depth) - 1))  # PIL's L mode scales too
    return samples[:, :, 0] if samples.shape[2] == 1 else samples


def decode_png_cv2(data: bytes, is_color: bool = True) -> np.ndarray:
    """What cv2.imdecode(data, 1 if is_color else 0) returns for a PNG: H x W x 3 BGR uint8,
    or H x W gray uint8 (from a colour file: libpng's weights, within one level of OpenCV).

    >>> decode_png_cv2(b"x")
    Traceback (most recent call last):
    spmd.errors.InvalidArgumentError: not a PNG file (its first bytes are b'x')
    """
    samples, ctype, depth, palette = _parse(data)
    if depth == 16:
        samples = (samples >> 8).astype(np.uint8)  # OpenCV's 8-bit read keeps the high byte
    elif ctype == 0 and depth < 8:
        samples = samples * np.uint8(255 // ((1 << depth) - 1))
    if ctype == 3:
        index = np.minimum(samples[:, :, 0], len(palette) - 1)
        rgb = palette[index]
    elif ctype in (2, 6):
        rgb = samples[:, :, :3]
    else:  # gray, gray + alpha
        gray = samples[:, :, 0]
        return np.repeat(gray[:, :, None], 3, axis=2) if is_color else gray.copy()
    if is_color:
        return np.ascontiguousarray(rgb[:, :, ::-1])
    r, g, b = (rgb[:, :, i].astype(np.uint32) for i in range(3))
    wr, wg, wb = _GRAY_WEIGHTS
    gray = ((wr * r + wg * g + wb * b) >> 15).astype(np.uint8)
    return np.where((r == g) & (g == b), r.astype(np.uint8), gray)
