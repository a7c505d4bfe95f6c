"""The files of one save, made current all at once: a kill at any instant leaves the previous
checkpoint or the new one, complete.

Why a journal. Users rely on fluid's layout: `dirname/<var>.npy` files (a variable named
'GRUCell/w' is the file w.npy of the subfolder GRUCell, as in fluid), or one archive with
`filename=`, `prefix.pdparams/.pdopt/.pdmodel`, in a directory that may hold their own files
and that several ranks may save into. POSIX cannot replace several files in one step, so the
choices are: a staging directory swapped in (one rename cannot replace a non-empty directory;
Linux's RENAME_EXCHANGE is missing on NFS and would drop files others put in the old directory
meanwhile), data files under new names with a manifest pointing to them (another layout, that
numpy and older spmd could not read), or roll-forward: stage every file, then durably record
the renames to make (the commit point), then make them, so that whoever finds the record
finishes them. spmd does the last, which keeps the layout and touches no file but its own:

1. every file goes to a temporary in the directory (`.<name>.<host>.<pid>.<token>.tmp`, a
   subfolder's file too: the rename moves it there; subfolders are made as they are needed),
   written, fsynced and described (bytes, CRC-32, and the shape and dtype of an .npy): the
   previous checkpoint is untouched;
2. under an exclusive lock of the directory (flock), interrupted saves are finished and dead
   processes' temporaries removed; then a journal (`.spmd-journal.<host>.<pid>.<token>.json`:
   the renames and the descriptions) is written to a temporary and renamed into place. From
   here the new checkpoint is complete on disk and only needs its names;
3. the renames, then the manifest (`.spmd-manifest.json`: every file spmd saved in the
   directory and its description), renamed into place too;
4. the journal is removed, the lock released.

A kill before 2 leaves the previous checkpoint (temporaries are never read; the next save
removes them). A kill after 2 leaves a journal: every spmd load and save of the directory first
takes the lock and finishes it (`recover`), so it only ever sees the new checkpoint, complete.
Loads hold a shared lock while they read, so a concurrent save (another rank into the same
directory, a trainer beside an evaluator) is seen wholly or not at all, and ranks saving into
one directory leave one rank's checkpoint, whole. Where the file system has no flock (some NFS)
saves and loads go on unlocked: a kill still leaves a complete checkpoint, but concurrent saves
into one directory may interleave (the manifest then reports files that differ from it).

SPMD_TEST_KILL_AT_FS_STEP=k (tests only) SIGKILLs the process at the k-th move of a save (for
n files: 1..n staged, n+1 journal written, n+2 journal current, n+3..2n+2 renames, 2n+3/2n+4
manifest written / current, 2n+5 journal removed); SPMD_TEST_FAIL_AT_FS_STEP=k raises an
OSError there instead. An error before the journal discards the temporaries; after it, the
journal stays for `recover`, as after a kill.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import threading
import time
import zipfile

import numpy as np

from ..errors import InvalidArgumentError, PreconditionError
from .reading import MANIFEST, describe, is_file_below, manifest_data, read_manifest

__all__ = ["MANIFEST", "AtomicFiles", "npz_writer", "reading", "recover", "text_writer",
           "write_array"]

_JOURNAL = ".spmd-journal."
_OTHER_HOST_STALE_S = 24 * 3600  # another host's temporary is only known dead by its age
_locked = threading.local()


class _Steps:
    """The moves of one save, counted for the test hooks (read when the save starts)."""

    def __init__(self):
        self.done = 0
        self.kill_at = int(os.environ.get("SPMD_TEST_KILL_AT_FS_STEP") or 0)
        self.fail_at = int(os.environ.get("SPMD_TEST_FAIL_AT_FS_STEP") or 0)

    def __call__(self) -> None:
        self.done += 1
        if self.done == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.done == self.fail_at:
            raise OSError(f"injected failure at move {self.done} of the save "
                          f"(SPMD_TEST_FAIL_AT_FS_STEP)")


def _no_step() -> None:
    """Recovery finishes another process's save: no test hook applies."""


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


def _host() -> str:
    return socket.gethostname().replace(".", "_")


def _temporary(directory: str, name: str, token: str) -> str:
    # the name is cut so that a long variable name still leaves room within NAME_MAX (255);
    # the token, unique per file of a save, tells cut names apart
    # every temporary is in the directory itself, also for a file of a subfolder ('/' -> '%'),
    # where the save's clean-up looks for them
    short = name[:80].replace("/", "%")
    return os.path.join(directory, f".{short}.{_host()}.{os.getpid()}.{token}.tmp")


def _write_json(directory: str, name: str, data, step) -> None:
    """`name` in `directory` holds `data` whole or not at all (a temporary, then a rename)."""
    tmp = _temporary(directory, name, secrets.token_hex(6))
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        step()
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)
    step()


# -- the directory lock ------------------------------------------------------------------------
@contextlib.contextmanager
def _lock(directory: str, exclusive: bool):
    """flock on the directory itself (no lock file); yields its descriptor, or None where the
    directory is missing, flock unsupported, or this thread holds it already (a load inside a
    load: a second descriptor would wait for the first)."""
    key = os.path.realpath(directory or ".")
    held = _locked.__dict__.setdefault("dirs", set())
    if key in held:
        yield None
        return
    try:
        fd = os.open(directory or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            fd = None  # no flock here (some NFS mounts): go on unlocked
        held.add(key)
        yield fd
    finally:
        held.discard(key)
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def reading(directory: str):
    """Hold `directory` for a load: interrupted saves finished, no save made current until the
    block ends. Yields the manifest ({file name: entry})."""
    with _lock(directory, exclusive=False) as fd:
        if _journals(directory):
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # a conversion: recovery renames
            recover(directory)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_SH)
        yield read_manifest(directory)


# -- saving ------------------------------------------------------------------------------------
class AtomicFiles:
    """`write(name, writer)` each file of one save into `directory`; on leaving the `with`
    block, all of them become current together (see the module doc). On an exception before
    the journal nothing changes.

    >>> # with AtomicFiles("ckpt") as files:
    >>> #     files.write("w.npy", lambda f: write_array(f, w))
    """

    def __init__(self, directory: str):
        self.directory = directory or "."
        self._staged: list[tuple[str, str, dict]] = []  # (temporary, target, description)
        self._token = secrets.token_hex(6)
        self._step = _Steps()

    def write(self, name: str, writer) -> None:
        """Stage the file `name` (a path below the directory: 'GRUCell/w.npy' is the file w.npy
        of the subfolder GRUCell, made here if missing) with what `writer(f)` writes."""
        if not is_file_below(name):
            raise InvalidArgumentError(f"not a file name below '{self.directory}': {name!r}")
        folder = os.path.dirname(name)
        if folder:
            os.makedirs(os.path.join(self.directory, folder), exist_ok=True)
        tmp = _temporary(self.directory, name, f"{self._token}{len(self._staged)}")
        f = open(tmp, "xb")  # honours the umask, unlike mkstemp's 0600
        self._staged.append((os.path.basename(tmp), name, {}))
        with f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        self._staged[-1][2].update(describe(tmp, name))
        self._step()

    def __enter__(self):
        return self

    def _discard(self) -> None:
        for tmp, _, _ in self._staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.directory, tmp))

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard()
            return False
        directory = self.directory
        journal = f"{_JOURNAL}{_host()}.{os.getpid()}.{self._token}.json"
        record = {"renames": [[tmp, target] for tmp, target, _ in self._staged],
                  "entries": {target: entry for _, target, entry in self._staged}}
        with _lock(directory, exclusive=True):
            try:
                fsync_dir(directory)  # the temporaries' names, before a journal claims them
                recover(directory, strict=False)
                _remove_stale_temporaries(directory)
                _write_json(directory, journal, record, self._step)
            except BaseException:
                if not os.path.exists(os.path.join(directory, journal)):
                    self._discard()
                raise
            # the new files are complete on disk: from here an error leaves the journal, and
            # the next save or load of the directory finishes the renames
            _finish(directory, journal, record, self._step)
        return False


def _finish(directory: str, journal: str, record: dict, step) -> None:
    """Steps 3 and 4 of a save whose journal is on disk; also how `recover` ends one."""
    for tmp, target in record["renames"]:
        with contextlib.suppress(FileNotFoundError):  # renamed already (a recovery)
            os.replace(os.path.join(directory, tmp), os.path.join(directory, target))
        step()
    fsync_dir(directory)
    for folder in sorted({os.path.dirname(t) for _, t in record["renames"]} - {""}):
        fsync_dir(os.path.join(directory, folder))  # the names of a subfolder's files
    entries = _manifest_for_update(directory)
    for _, target in record["renames"]:
        entries[target] = record["entries"].get(target) or describe(
            os.path.join(directory, target), target)  # a journal of spmd before version 1
    _write_json(directory, MANIFEST, manifest_data(entries), step)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, journal))
    fsync_dir(directory)
    step()


def _manifest_for_update(directory: str) -> dict:
    """The manifest a save extends; a damaged one is replaced (loads would refuse it)."""
    try:
        return dict(read_manifest(directory))
    except InvalidArgumentError:
        return {}


def _journals(directory: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory or ".")
                      if n.startswith(_JOURNAL) and n.endswith(".json"))
    except OSError:
        return []


def recover(directory: str, strict: bool = True) -> None:
    """Finish the saves into `directory` that were interrupted after their journal was
    written. The caller holds the directory's exclusive lock (or there is no flock). A damaged
    journal is an error (`strict`, for loads) or left alone (for a save, which makes its own
    files current whatever that journal said)."""
    for name in _journals(directory):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                record = _checked_record(json.load(f))
        except FileNotFoundError:
            continue  # finished meanwhile (no flock here)
        except (OSError, ValueError, KeyError, TypeError) as e:
            if not strict:
                continue
            raise InvalidArgumentError(
                f"the journal '{path}' of an interrupted save is damaged ({e}): the save may "
                f"have replaced only some of the files in '{directory}'. Save the checkpoint "
                f"again, then delete the journal") from None
        try:
            _finish(directory, name, record, _no_step)
        except OSError as e:
            raise PreconditionError(
                f"'{directory}' holds a save interrupted after its commit point (journal "
                f"'{name}') that this process cannot finish ({e}); run a load or save of the "
                f"directory once with write access to it") from None


def _checked_record(record) -> dict:
    renames = [[_plain(tmp), _below(target)] for tmp, target in record["renames"]]
    entries = record.get("entries") or {}
    if not isinstance(entries, dict):
        raise TypeError("its entries are not a mapping")
    return {"renames": renames, "entries": entries}


def _plain(name) -> str:
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    return name


def _below(name) -> str:
    if not is_file_below(name):
        raise ValueError(f"not a file name below the directory: {name!r}")
    return name


def _remove_stale_temporaries(directory: str) -> None:
    """Temporaries of saves that died before their journal: this host's dead processes', and
    another host's not touched for a day."""
    host, now = _host(), time.time()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        parts = name.split(".")
        if not (name.startswith(".") and name.endswith(".tmp") and len(parts) >= 5
                and parts[-3].isdigit()):
            continue
        path = os.path.join(directory, name)
        owner_host, pid = parts[-4], int(parts[-3])
        with contextlib.suppress(OSError):
            if (not _alive(pid) if owner_host == host
                    else now - os.stat(path).st_mtime > _OTHER_HOST_STALE_S):
                os.unlink(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- writers -----------------------------------------------------------------------------------
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


def npz_bytes(arrays: dict) -> bytes:
    """`arrays` as the bytes of an .npz archive (npz_writer's, in memory)."""
    import io

    buffer = io.BytesIO()
    npz_writer(arrays)(buffer)
    return buffer.getvalue()


def text_writer(text: str):
    return lambda f: f.write(text.encode("utf-8"))
