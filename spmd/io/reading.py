"""Reading a checkpoint's files, every one checked before anything is allocated.

A load first inspects: each `.npy` file's (or `.npz` member's) header is parsed and checked
against the file's size and against the directory's manifest entry (bytes, shape, dtype,
CRC-32) where the save left one; only then are the arrays read, into buffers of the size the
checked header announced, and their CRC-32 compared with the manifest's. Random bytes,
truncated files, a header announcing a huge shape and a file changed after its save are each an
InvalidArgumentError naming the file, the variable, what was expected and what was found. Files
without a manifest entry (numpy's own, or written by an older spmd) get the same header checks.
Pickled data is refused, never unpickled.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError

MANIFEST = ".spmd-manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Header:
    """A checked .npy header: a file of its own (`member` None) or a member of an archive."""

    name: str  # the variable
    path: str
    shape: tuple
    dtype: np.dtype
    fortran: bool
    offset: int  # where the data starts, in the file (or the member)
    crc32: int | None = None  # the whole file's, as the manifest records it
    member: str | None = None


def is_file_below(name) -> bool:
    """Whether `name` is a file path below a directory: plain components joined by '/'. fluid
    saves a variable named 'GRUCell/BasicGRUUnit_0.w_0' (fluid.layers.rnn's cells name their
    parameters so) as that file of a subfolder; nothing may reach above the directory."""
    return (isinstance(name, str) and bool(name) and "\0" not in name
            and not (os.altsep and os.altsep in name)
            and all(part not in ("", ".", "..") for part in name.split("/")))


# -- the manifest ------------------------------------------------------------------------------
def read_manifest(directory: str) -> dict:
    """{file name: entry} as the last save into `directory` recorded it; {} without one.

    >>> read_manifest("ckpt").get("fc_0.w_0.npy")  # doctest: +SKIP
    {'bytes': 176, 'crc32': 3941537395, 'dtype': '<f4', 'shape': [3, 4]}
    """
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise InvalidArgumentError(
            f"cannot read the checkpoint manifest '{path}' ({e}); it is written whole by every "
            f"save, so it was damaged afterwards: delete it to load the files as they are "
            f"(checked against their headers only), or save again") from None
    if isinstance(data, dict) and isinstance(data.get("files"), dict):
        return data["files"]
    return data if isinstance(data, dict) else {}  # spmd before version 1: {name: entry}


def manifest_data(files: dict) -> dict:
    return {"spmd_checkpoint_manifest": MANIFEST_VERSION, "files": files}


def crc32_of(f, start: int = 0) -> int:
    """CRC-32 of the open file `f` from `start` to its end, read in 1 MiB pieces."""
    f.seek(start)
    crc, buf = 0, bytearray(_CHUNK)
    view = memoryview(buf)
    while True:
        n = f.readinto(buf)
        if not n:
            return crc
        crc = zlib.crc32(view[:n], crc)


def describe(path: str, name: str) -> dict:
    """The manifest entry of the file `path`, to be called `name`, as it is now: bytes, CRC-32
    and, for an .npy file, its shape and dtype."""
    with open(path, "rb") as f:
        entry: dict = {"bytes": os.fstat(f.fileno()).st_size, "crc32": crc32_of(f)}
        if name.endswith(".npy"):
            f.seek(0)
            shape, dtype, _, _ = _npy_header(f, path, name[:-4], entry["bytes"])
            entry.update(shape=list(shape), dtype=dtype.str)
    return entry


def _dtype_name(text) -> str:
    try:
        return np.dtype(text).name
    except TypeError:
        return repr(text)


def _entry_text(entry: dict) -> str:
    text = f"{entry.get('bytes')} bytes"
    if "crc32" in entry:
        text += f", CRC-32 {entry['crc32']}"
    if "shape" in entry:
        text = f"shape {entry.get('shape')}, dtype {_dtype_name(entry.get('dtype'))}, " + text
    return text


def _recorded(entry: dict | None) -> str:
    return f" (the manifest records {_entry_text(entry)})" if entry else ""


def _changed(path: str, what: str, entry: dict, found: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"cannot load {what} from '{path}': the file does not match the directory's manifest "
        f"({MANIFEST}): the manifest has {_entry_text(entry)}; the file has {found}. It was "
        f"changed or damaged after spmd.io saved it: save again (or delete {MANIFEST} to load "
        f"the files as they are)")


# -- .npy --------------------------------------------------------------------------------------
def _npy_header(f, path: str, name: str, size: int, entry: dict | None = None):
    """(shape, dtype, fortran, data offset) of the .npy stream `f` of `size` bytes: a plain
    dtype, and exactly the data its header announces."""
    what = f"variable '{name}' from '{path}'"
    try:
        version = np.lib.format.read_magic(f)
    except ValueError:
        f.seek(0)
        head = f.read(8)
        found = "an empty file" if size == 0 else f"{size} bytes starting with {head!r}"
        raise InvalidArgumentError(
            f"cannot load {what}: it is not a .npy file (its first bytes are not numpy's magic "
            f"string b'\\x93NUMPY'); expected an array{_recorded(entry)}, found {found}. The "
            f"file is damaged or was not written by spmd.io / np.save") from None
    try:
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, EOFError) as e:
        raise InvalidArgumentError(
            f"cannot load {what}: its .npy header is damaged ({e}); expected an "
            f"array{_recorded(entry)}. Save again") from None
    if dtype.hasobject:
        raise InvalidArgumentError(
            f"cannot load {what}: it holds pickled data or an object array, which spmd refuses "
            f"to load (unpickling can run arbitrary code); save plain arrays with spmd.io or "
            f"np.save(..., allow_pickle=False)")
    offset = f.tell()
    want = offset + math.prod(shape) * dtype.itemsize
    if want != size:
        state = "truncated" if want > size else "longer than its header says"
        raise InvalidArgumentError(
            f"cannot load {what}: the file is {state}: its header announces shape "
            f"{list(shape)} of {dtype} ({want} bytes with the header), the file has {size} "
            f"bytes{_recorded(entry)}; it was cut short or damaged after its save (a partial "
            f"copy?): restore it or save again")
    return tuple(shape), dtype, bool(fortran), offset


def inspect_npy(path: str, name: str, entry: dict | None = None) -> Header:
    """Variable `name`'s .npy file `path`, its header checked against its size and against its
    manifest `entry` (if any); nothing is allocated."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        saved = (f"; the directory's manifest lists it{_recorded(entry)}, so it was deleted "
                 f"after the save" if entry else "")
        raise NotFoundError(
            f"cannot load variable '{name}': its file '{path}' does not exist{saved}; was it "
            f"saved with filename=... (then pass the same filename) or under another name?"
        ) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        shape, dtype, fortran, offset = _npy_header(f, path, name, size, entry)
    if entry and (entry.get("bytes") != size or entry.get("shape") != list(shape)
                  or entry.get("dtype") != dtype.str):
        raise _changed(path, f"variable '{name}'", entry,
                       f"shape {list(shape)}, dtype {dtype.name}, {size} bytes")
    crc = entry.get("crc32") if entry else None
    return Header(name, path, shape, dtype, fortran, offset, crc)


def _read_npy(h: Header, into: np.ndarray | None = None) -> np.ndarray:
    """The array of the checked header `h`: in a buffer of the size the header announced, or
    straight into `into` (its shape, dtype and C order; read_arrays checked the file's CRC-32
    before: a mismatch now means another process changed the file while it was read)."""
    nbytes = math.prod(h.shape) * h.dtype.itemsize
    with open(h.path, "rb") as f:
        crc = zlib.crc32(f.read(h.offset))
        flat = np.empty(nbytes, np.uint8) if into is None else into.reshape(-1).view(np.uint8)
        view, done = memoryview(flat), 0
        while done < nbytes:
            n = f.readinto(view[done:])
            if not n:
                raise InvalidArgumentError(
                    f"cannot load variable '{h.name}' from '{h.path}': the file shrank to "
                    f"{h.offset + done} bytes while it was read; another process is writing it")
            done += n
    crc = zlib.crc32(view, crc) if h.crc32 is not None else None
    if crc != h.crc32:
        found = f"the same size but another CRC-32 ({crc})"
        if into is not None:
            found += ("; it was checked before its array was read in place, so another "
                      "process changed it meanwhile, and the variable now holds part of it")
        raise _changed(h.path, f"variable '{h.name}'",
                       {"bytes": h.offset + nbytes, "crc32": h.crc32}, found)
    if into is not None:
        return into
    if h.dtype.itemsize == 0:
        return np.empty(h.shape, h.dtype)
    return flat.view(h.dtype).reshape(h.shape, order="F" if h.fortran else "C")


def _fits(h: Header, target) -> bool:
    """Whether the array of `h` (a .npy file or an archive's member) may be read straight
    into `target`."""
    return (type(target) is np.ndarray and not h.fortran
            and target.shape == tuple(h.shape) and target.dtype == h.dtype
            and target.flags.c_contiguous and target.flags.writeable and target.size > 0)


def _check_crc(h: Header) -> None:
    """Refuse `h`'s file, before anything is read from it, if its CRC-32 is not the
    manifest's (a pass over the file in 1 MiB pieces)."""
    if h.crc32 is None:
        return
    with open(h.path, "rb") as f:
        crc = crc32_of(f)
    if crc != h.crc32:
        raise _changed(h.path, f"variable '{h.name}'", {"crc32": h.crc32},
                       f"another CRC-32 ({crc})")


# -- .npz --------------------------------------------------------------------------------------
def inspect_npz(path: str, names: list[str], entry: dict | None = None) -> dict:
    """{name: Header} of the variables `names` in the archive `path`: the file checked against
    its manifest entry (size and CRC-32), every member's header against its size."""
    what = f"variable(s) {_shown(names)}"
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFoundError(f"cannot load {what}: the file '{path}' does not exist") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if entry and entry.get("bytes") != size:
            raise _changed(path, what, entry, f"{size} bytes")
        crc = crc32_of(f) if entry and entry.get("crc32") is not None else None
        if crc is not None and crc != entry["crc32"]:
            raise _changed(path, what, entry, f"the same size but CRC-32 {crc}")
        try:
            archive = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, EOFError):
            raise InvalidArgumentError(
                f"cannot load {what} from '{path}': {_not_an_archive(f, size)}") from None
        with archive:
            return _member_headers(archive, path, names)


def _member_headers(archive: zipfile.ZipFile, path: str, names: list[str]) -> dict:
    held = {m[:-4]: m for m in archive.namelist() if m.endswith(".npy")}
    missing = [n for n in names if n not in held]
    if missing:
        raise NotFoundError(
            f"cannot load variable(s) {_shown(missing)}: not in '{path}', which holds "
            f"{_shown(sorted(held))}")
    out = {}
    for name in names:
        info = archive.getinfo(held[name])
        try:
            with archive.open(info) as member:
                shape, dtype, fortran, offset = _npy_header(member, path, name, info.file_size)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise InvalidArgumentError(
                f"cannot load variable '{name}' from '{path}': the archive is damaged ({e}); "
                f"save again") from None
        out[name] = Header(name, path, shape, dtype, fortran, offset, member=info.filename)
    return out


def _shown(names: list[str]) -> list[str]:
    return list(names[:8]) + ([f"... {len(names) - 8} more"] if len(names) > 8 else [])


def _not_an_archive(f, size: int) -> str:
    f.seek(0)
    head = f.read(2)
    f.seek(max(size - 1, 0))
    last = f.read(1)
    # a pickle starts with its PROTO opcode and ends with STOP
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5 and last == b".":
        return ("it holds pickled data, which spmd refuses to load (unpickling can run "
                "arbitrary code); save plain arrays with spmd.io or np.savez")
    found = "an empty file" if size == 0 else f"{size} bytes starting with {head!r}"
    return (f"it is not an .npz archive: expected a zip file (b'PK'), found {found}; it is "
            f"damaged, truncated, or was not written by spmd.io / np.savez")


def _read_member(archive: zipfile.ZipFile, h: Header, into: np.ndarray | None = None,
                 check_only: bool = False) -> np.ndarray | None:
    """The array of member `h`: a new one, or read straight into `into` (its shape, dtype and
    C order), or with `check_only` read through and dropped, a piece at a time, which checks
    the member's CRC-32 (zipfile does at its end) before anything is written in place."""
    try:
        with archive.open(h.member) as member:
            if into is None and not check_only:
                return np.lib.format.read_array(member, allow_pickle=False)
            member.read(h.offset)  # the .npy header (inspect_npz checked it)
            if check_only:
                while member.read(_CHUNK):
                    pass
                return None
            view, done = memoryview(into.reshape(-1).view(np.uint8)), 0
            while done < len(view):
                n = member.readinto(view[done:done + _CHUNK])
                if not n:
                    raise EOFError("the member ended before its array did")
                done += n
            member.read()  # at its end zipfile compares the member's CRC-32
            return into
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise InvalidArgumentError(
            f"cannot load variable '{h.name}' from '{h.path}': the archive is damaged ({e}); "
            f"save again") from None


def read_npz_bytes(data: bytes, names: list[str], check) -> dict:
    """{name: array} of the variables `names` in an .npz archive held in memory (what
    save_vars(dirname=None) returned); `check(header)` vets each before any is read."""
    where = "the bytes given"
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgumentError(
            f"loading from memory (dirname=None): the parameters must be the bytes that "
            f"save_vars / save_persistables(executor, None, ...) returned, got "
            f"{type(data).__name__}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    except zipfile.BadZipFile:
        raise InvalidArgumentError(
            f"cannot load variable(s) {_shown(names)} from memory: {len(data)} bytes that are "
            f"not an .npz archive (expected what save_vars(executor, None, ...) returned)"
        ) from None
    with archive:
        headers = _member_headers(archive, where, names)
        for h in headers.values():
            check(h)
        return {n: _read_member(archive, h) for n, h in headers.items()}


# -- both --------------------------------------------------------------------------------------
def read_arrays(headers: list[Header], into: dict | None = None) -> dict:
    """{variable: array} of checked headers (inspect_npy / inspect_npz). `into`: {variable:
    array} the caller lets a .npy file or archive member be read straight into (a large
    table: no second copy of it while it loads), where its shape, dtype and order fit; those
    are read last, after every other array loaded and a first pass checked their own CRC-32
    (the file's, the member's), so a damaged checkpoint leaves them as they were."""
    out, archives, in_place = {}, {}, []
    for h in headers:
        target = (into or {}).get(h.name)
        if target is not None and _fits(h, target):
            in_place.append((h, target))
        elif h.member is None:
            out[h.name] = _read_npy(h)
        else:
            archives.setdefault(h.path, []).append(h)
    for path, members in archives.items():
        with zipfile.ZipFile(path) as archive:
            for h in members:
                out[h.name] = _read_member(archive, h)
    for h, _ in in_place:  # every check first, then the writes
        if h.member is None:
            _check_crc(h)
        else:
            with zipfile.ZipFile(h.path) as archive:
                _read_member(archive, h, check_only=True)
    for h, target in in_place:
        if h.member is None:
            out[h.name] = _read_npy(h, target)
        else:
            with zipfile.ZipFile(h.path) as archive:
                out[h.name] = _read_member(archive, h, target)
    return out


def read_text(path: str, entry: dict | None = None) -> str:
    """The UTF-8 text file `path` (a program), checked against its manifest entry."""
    with open(path, "rb") as f:
        data = f.read()
    crc = zlib.crc32(data)
    if entry and (entry.get("bytes"), entry.get("crc32", crc)) != (len(data), crc):
        raise _changed(path, "the program", entry, f"{len(data)} bytes, CRC-32 {crc}")
    return data.decode("utf-8")
