"""spmd's own PNG reader on hostile or damaged files: a data stream that inflates past the
header's size is not inflated, a huge declared size is refused, damaged chunks are
InvalidArgumentErrors naming the chunk, and a large Average/Paeth-filtered file is left to a
library (SlowPNG) instead of minutes of Python."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from spmd.dataset._png import MAX_PIXELS, PNG_SIGNATURE, SlowPNG, read_png
from spmd.errors import InvalidArgumentError


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(width, height, payload, ctype=0, depth=8, extra=b""):
    header = struct.pack(">IIBBBBB", width, height, depth, ctype, 0, 0, 0)
    return (PNG_SIGNATURE + _chunk(b"IHDR", header) + extra + _chunk(b"IDAT", payload)
            + _chunk(b"IEND", b""))


def test_a_stream_inflating_past_the_header_is_cut_at_the_header_size():
    c = zlib.compressobj(9)
    blob = b"".join(c.compress(b"\0" * (1 << 20)) for _ in range(64)) + c.flush()  # 64 MiB
    image = read_png(_png(1, 1, blob))  # 1 x 1: 2 bytes are inflated, not 64 MiB
    assert image.shape == (1, 1) and image[0, 0] == 0


def test_a_huge_declared_image_is_refused():
    with pytest.raises(InvalidArgumentError, match=r"30000 x 30000 pixels: expected 1 to "
                                                   rf"{MAX_PIXELS}"):
        read_png(_png(30000, 30000, zlib.compress(b"\0" * 30001)))


@pytest.mark.parametrize("extra,message", [
    (_chunk(b"PLTE", b"\1\2\3\4"), r"PLTE chunk of 4 bytes"),
    (_chunk(b"PLTE", b""), r"PLTE chunk of 0 bytes"),
])
def test_damaged_chunks_are_named(extra, message):
    with pytest.raises(InvalidArgumentError, match=message):
        read_png(_png(1, 1, zlib.compress(b"\0\0"), ctype=3, extra=extra))


def test_a_short_header_is_named():
    data = PNG_SIGNATURE + _chunk(b"IHDR", b"\0" * 5) + _chunk(b"IEND", b"")
    with pytest.raises(InvalidArgumentError, match="IHDR chunk of 5 bytes, expected 13"):
        read_png(data)


def test_a_large_paeth_filtered_file_is_left_to_a_library():
    width = height = 1300  # 1.69 MB of gray... times 3 channels (RGB) = 5 MB > the limit
    rows = b"".join(b"\4" + b"\1" * (width * 3) for _ in range(height))
    with pytest.raises(SlowPNG, match="install opencv-python-headless or Pillow"):
        read_png(_png(width, height, zlib.compress(rows), ctype=2))


def test_sub_filtered_rows_decode_as_a_running_sum():
    row = b"\1" + bytes([5, 250, 7, 10, 1, 2])  # two RGB pixels, Sub filter
    image = read_png(_png(2, 1, zlib.compress(row), ctype=2))
    np.testing.assert_array_equal(image, [[[5, 250, 7], [15, 251, 9]]])


def test_one_bit_gray_reads_as_bool_as_pillow_gives():
    image = read_png(_png(3, 1, zlib.compress(b"\0\xa0"), depth=1))  # bits 1, 0, 1
    assert image.dtype == bool and image.tolist() == [[True, False, True]]
