"""The files of a save, made current all at once, and read back only after their headers were
checked.

A save (AtomicFiles) keeps fluid's layout (`dirname/<var>.npy`, or one archive) and makes it
current in four moves:

1. every file goes to a temporary beside its target (`.<name>.<host>.<pid>.<token>.tmp`),
   written and fsynced: the previous checkpoint is untouched;
2. a journal (`.spmd-journal.<token>.json`) lists the renames to make, written and fsynced:
   from now on the new checkpoint is complete on disk and only needs its names;
3. the renames, then the manifest (`.spmd-manifest.json`: name, shape, dtype and size of every
   file of the directory that spmd wrote), renamed into place too;
4. the journal is removed.

A kill before 2 leaves the previous checkpoint as it was (the temporaries are ignored, and
removed by the next save from this host once their process is gone); a kill after 2 leaves a
journal that the next save or load of the directory finishes (`recover`): the new checkpoint,
complete. Every load checks each file's header against its file size and the manifest before
allocating, so random bytes, a truncated file or a header announcing a huge shape are an error
naming the file and the variable, never a MemoryError; pickled data is refused.

SPMD_TEST_KILL_AT_FS_STEP=k (tests only) SIGKILLs the process at the k-th move of a save, to
check that every instant leaves a complete checkpoint; SPMD_TEST_FAIL_AT_FS_STEP=k raises an
OSError there instead. An error before the journal discards the temporaries; after it, the
journal stays for `recover`, as after a kill.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import zipfile

import numpy as np

from ..errors import InvalidArgumentError, NotFoundError

MANIFEST = ".spmd-manifest.json"
_JOURNAL_PREFIX = ".spmd-journal."
_steps_done = 0


def _fs_step() -> None:
    """One move of a save; the test hooks may kill the process or fail here."""
    global _steps_done
    _steps_done += 1
    kill_at = os.environ.get("SPMD_TEST_KILL_AT_FS_STEP")
    if kill_at and _steps_done == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)
    fail_at = os.environ.get("SPMD_TEST_FAIL_AT_FS_STEP")
    if fail_at and _steps_done == int(fail_at):
        raise OSError(f"injected failure at step {_steps_done} of the save "
                      f"(SPMD_TEST_FAIL_AT_FS_STEP)")


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return  # a platform without directory fsync: the renames are still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_json(path: str, data) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


# -- saving ------------------------------------------------------------------------------------
class AtomicFiles:
    """`write(target, writer)` each file of one save; on leaving the `with` block, all of them
    become current together (see the module doc). On an exception nothing changes."""

    def __init__(self):
        global _steps_done
        _steps_done = 0  # the test hooks count the moves of one save
        self._staged: list[tuple[str, str]] = []  # (temporary, target)
        self._token = secrets.token_hex(6)

    def write(self, path: str, writer) -> None:
        directory, base = os.path.split(path)
        tmp = os.path.join(directory, f".{base}.{_owner()}.{self._token}.tmp")
        f = open(tmp, "xb")  # honours the umask, unlike mkstemp's 0600
        self._staged.append((tmp, path))
        with f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        _fs_step()

    def __enter__(self):
        return self

    def _discard(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard()
            return False
        by_dir: dict[str, list] = {}
        for tmp, path in self._staged:
            by_dir.setdefault(os.path.dirname(path), []).append(
                [os.path.basename(tmp), os.path.basename(path)])
        journals = {}
        try:
            for directory, renames in by_dir.items():
                _remove_stale_temporaries(directory)
                journal = os.path.join(directory, f"{_JOURNAL_PREFIX}{self._token}.json")
                _write_json(journal, {"renames": renames})
                journals[directory] = journal
            for directory in by_dir:
                fsync_dir(directory)
            _fs_step()
        except BaseException:
            for journal in journals.values():
                with contextlib.suppress(OSError):
                    os.unlink(journal)
            self._discard()
            raise
        # the new files are complete on disk: from here an error leaves the journals, and the
        # next save or load of the directory finishes the renames
        for directory, renames in by_dir.items():
            _finish(directory, journals[directory], renames)
        return False


def _owner() -> str:
    return f"{socket.gethostname().replace('.', '_')}.{os.getpid()}"


def _finish(directory: str, journal: str, renames: list) -> None:
    """Steps 3 and 4 of a save whose journal is on disk; also how `recover` ends one."""
    for tmp, target in renames:
        with contextlib.suppress(FileNotFoundError):  # renamed already (a recovery)
            os.replace(os.path.join(directory, tmp), os.path.join(directory, target))
        _fs_step()
    fsync_dir(directory)
    _update_manifest(directory, [target for _, target in renames])
    _fs_step()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal)
    fsync_dir(directory)


def _update_manifest(directory: str, targets: list[str]) -> None:
    manifest = read_manifest(directory)
    for target in targets:
        manifest[target] = _describe_file(os.path.join(directory, target))
    tmp = os.path.join(directory, f".{MANIFEST}.{_owner()}.{secrets.token_hex(6)}.tmp")
    _write_json(tmp, manifest)
    os.replace(tmp, os.path.join(directory, MANIFEST))
    fsync_dir(directory)


def _describe_file(path: str) -> dict:
    entry: dict = {"bytes": os.path.getsize(path)}
    if path.endswith(".npy"):
        with open(path, "rb") as f:
            shape, dtype, _ = _npy_header(f, path, os.path.basename(path)[:-4])
        entry.update(shape=list(shape), dtype=dtype.str)
    return entry


def _remove_stale_temporaries(directory: str) -> None:
    """Temporaries this host's dead processes left (a save killed before its journal)."""
    host = socket.gethostname().replace(".", "_")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        parts = name.split(".")
        if not (name.startswith(".") and name.endswith(".tmp") and len(parts) >= 5):
            continue
        owner_host, pid = parts[-4], parts[-3]
        if owner_host == host and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(directory: str) -> None:
    """Finish the saves into `directory` that were killed after their journal was written."""
    try:
        journals = sorted(n for n in os.listdir(directory) if n.startswith(_JOURNAL_PREFIX))
    except OSError:
        return
    for name in journals:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                renames = json.load(f)["renames"]
            renames = [[_plain(tmp), _plain(target)] for tmp, target in renames]
        except FileNotFoundError:
            continue  # another process finished it
        except (ValueError, KeyError, TypeError):
            # written before its fsync completed: the save had not reached step 2
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        _finish(directory, path, renames)


def _plain(name) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    return name


def read_manifest(directory: str) -> dict:
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_array(f, array: np.ndarray) -> None:
    np.save(f, array, allow_pickle=False)


def npz_writer(arrays: dict):
    """Write `arrays` as an .npz archive (what np.savez writes), named by variable, with no
    keyword clash for variables called 'file' or 'allow_pickle'."""

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, array in arrays.items():
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    write_array(member, array)

    return write


def text_writer(text: str):
    return lambda f: f.write(text.encode("utf-8"))


# -- loading -----------------------------------------------------------------------------------
def _npy_header(f, path: str, name: str):
    """(shape, dtype, header bytes) of the .npy stream `f`, checked: a plain dtype, and a data
    size the stream can hold."""
    what = f"variable '{name}' from '{path}'"
    try:
        version = np.lib.format.read_magic(f)
    except ValueError:
        raise InvalidArgumentError(
            f"cannot load {what}: it is not a .npy file (its first bytes are not numpy's "
            f"magic string); the file is damaged or was not written by spmd.io / np.save"
        ) from None
    try:
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, EOFError) as e:
        raise InvalidArgumentError(f"cannot load {what}: its .npy header is damaged ({e})"
                                   ) from None
    if dtype.hasobject:
        raise InvalidArgumentError(
            f"cannot load {what}: it holds pickled data or an object array, which spmd refuses "
            f"to load (unpickling can run arbitrary code); save plain arrays with spmd.io or "
            f"np.save(..., allow_pickle=False)")
    return tuple(shape), dtype, f.tell()


def _check_size(path: str, name: str, shape, dtype, header: int, size: int) -> None:
    want = header + int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if want != size:
        state = "truncated" if want > size else "longer than its header says"
        raise InvalidArgumentError(
            f"cannot load variable '{name}' from '{path}': the file is {state}: its header "
            f"announces shape {list(shape)} of {dtype} ({want} bytes with the header), the file "
            f"has {size} bytes; the save was interrupted or the file damaged: save again")


def _dtype_name(text) -> str:
    try:
        return np.dtype(text).name
    except TypeError:
        return repr(text)


def read_npy(path: str, name: str) -> np.ndarray:
    """Variable `name`'s array from the .npy file `path`, its header checked before anything
    is allocated (against the file size and, where there is one, the directory's manifest)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFoundError(
            f"cannot load variable '{name}': its file '{path}' does not exist; was it saved "
            f"with filename=... (then pass the same filename) or under another name?"
        ) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        shape, dtype, header = _npy_header(f, path, name)
        _check_size(path, name, shape, dtype, header, size)
        entry = read_manifest(os.path.dirname(path)).get(os.path.basename(path))
        if entry and (entry.get("bytes") != size or entry.get("shape") != list(shape)
                      or entry.get("dtype") != dtype.str):
            raise InvalidArgumentError(
                f"cannot load variable '{name}' from '{path}': the file does not match the "
                f"directory's manifest ({MANIFEST}): the manifest has shape "
                f"{entry.get('shape')}, dtype {_dtype_name(entry.get('dtype'))}, "
                f"{entry.get('bytes')} bytes; the file has shape {list(shape)}, dtype "
                f"{dtype.name}, {size} bytes. It was changed outside spmd.io; save again (or "
                f"delete {MANIFEST} to load the files as they are)")
        f.seek(0)
        try:
            return np.load(f, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise InvalidArgumentError(f"cannot load variable '{name}' from '{path}': {e}"
                                       ) from None


def read_npz(path: str, names: list[str]) -> dict:
    """The arrays `names` from the .npz archive `path`; every name must be in it, and every
    member's header is checked before its array is read."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise NotFoundError(
            f"cannot load variable(s) {names}: the file '{path}' does not exist") from None
    with f:
        try:
            archive = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, EOFError):
            raise InvalidArgumentError(
                f"cannot load variable(s) {names} from '{path}': {_not_an_archive(f)}"
            ) from None
        with archive:
            held = {m[:-4]: m for m in archive.namelist() if m.endswith(".npy")}
            missing = [n for n in names if n not in held]
            if missing:
                shown = sorted(held)[:8] + ([f"... {len(held) - 8} more"] if len(held) > 8
                                            else [])
                raise NotFoundError(
                    f"cannot load variable(s) {missing}: not in '{path}', which holds {shown}")
            out = {}
            for name in names:
                info = archive.getinfo(held[name])
                try:
                    with archive.open(info) as member:
                        shape, dtype, header = _npy_header(member, path, name)
                    _check_size(path, name, shape, dtype, header, info.file_size)
                    with archive.open(info) as member:
                        out[name] = np.lib.format.read_array(member, allow_pickle=False)
                except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
                    if isinstance(e, InvalidArgumentError):
                        raise
                    raise InvalidArgumentError(
                        f"cannot load variable '{name}' from '{path}': the archive is damaged "
                        f"({e}); save again") from None
            return out


def _not_an_archive(f) -> str:
    f.seek(0)
    head = f.read(2)
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle's PROTO opcode
        return ("it holds pickled data, which spmd refuses to load (unpickling can run "
                "arbitrary code); save plain arrays with spmd.io or np.savez")
    return ("it is not an .npz archive (damaged, truncated, or not written by spmd.io / "
            "np.savez)")


def read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8")
