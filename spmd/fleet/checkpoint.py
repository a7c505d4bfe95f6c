"""fleet's training checkpoints (fluid 1.8's `fleet.save_check_point` / `load_check_point` /
`clean_redundant_check_points`), in fluid's layout:

    path/__paddle_fleet_checkpoint__.0/_paddle_fleet_param__   every persistable, one archive
    path/__paddle_fleet_checkpoint__.0/fleet_train_status      {"epoch_no": n}, JSON
    path/__paddle_fleet_checkpoint__.1/...                     the next save

Each save is a new numbered directory; a load reads the highest number. Why it is atomic:
the directory is written under a private name (`.__paddle_fleet_checkpoint__.<host>.<pid>.
<token>.tmp`, which no load reads), its files each made whole by spmd.io's AtomicFiles, then
renamed to the next number in one step; a kill at any instant leaves the checkpoints there were
or those plus the new one, whole. The number is picked and the rename made under an exclusive
flock of `path`, so ranks saving into one shared directory never take the same number; a load
holds the lock shared, so a save's clean-up never deletes the checkpoint a load is reading.
Private directories of dead saves are removed by the next save. A file system that needs
upload/download (`fs.need_upload_download()`) gets fluid's flow instead: written to
`local_cache_path`, uploaded to `<dir>.tmp`, moved into place (as atomic as that fs's mv).

    >>> # fleet.save_check_point(exe, "ckpt", TrainStatus(epoch))
    >>> # status = fleet.load_check_point(exe, "ckpt", fleet.worker_index())
    >>> # start = status.next() if status is not None else 0
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time

from .. import io
from ..errors import InvalidArgumentError, NotFoundError
from ..io.files import (
    _OTHER_HOST_STALE_S,
    AtomicFiles,
    _alive,
    _host,
    _lock,
    fsync_dir,
    reading,
    text_writer,
)
from ..io.reading import read_text
from .fs import LocalFS

__all__ = ["CHECKPOINT_PREFIX", "PARAM_FILE", "STATUS_FILE", "CheckpointNotFoundError",
           "TrainStatus",
           "clean_redundant_check_points", "last_checkpoint_no", "load_check_point",
           "save_check_point"]

CHECKPOINT_PREFIX = "__paddle_fleet_checkpoint__"
PARAM_FILE = "_paddle_fleet_param__"
STATUS_FILE = "fleet_train_status"


class CheckpointNotFoundError(NotFoundError, AssertionError):
    """load_check_point(..., ignore_empty=False) found no checkpoint. Also an AssertionError,
    which is what fluid raises there."""


class TrainStatus:
    """How far training got: the last completed epoch (-1: none yet).

    >>> status = TrainStatus(3)
    >>> status.next(), status == TrainStatus(3), status != TrainStatus(2)
    (4, True, True)
    """

    def __init__(self, epoch_no: int = -1):
        self._epoch_no = epoch_no  # fluid's attribute name, which user code reads

    @property
    def epoch_no(self) -> int:
        """The last completed epoch."""
        return self._epoch_no

    def next(self) -> int:
        """The epoch to run next."""
        return self._epoch_no + 1

    def __eq__(self, other):
        if not isinstance(other, TrainStatus):
            return NotImplemented
        return self._epoch_no == other._epoch_no

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        return hash(self._epoch_no)

    def __repr__(self):
        return f"TrainStatus(epoch_no={self._epoch_no})"


def _tag() -> str:
    return io._rank_tag()


def _numbers(root: str, fs) -> list[int]:
    """The numbers n of the `__paddle_fleet_checkpoint__.n` directories in `root` (others,
    like fluid's `.n.tmp` leftovers and spmd's private ones, are not checkpoints)."""
    found = []
    for name in fs.list_dirs(root):
        parts = name.split(".")
        if len(parts) == 2 and parts[0] == CHECKPOINT_PREFIX and parts[1].isdigit():
            found.append(int(parts[1]))
    return sorted(found)


def last_checkpoint_no(root: str, fs=None) -> int:
    """The highest checkpoint number in `root`, -1 if there is none.

    >>> last_checkpoint_no("/nonexistent")
    -1
    """
    numbers = _numbers(root, fs if fs is not None else LocalFS())
    return numbers[-1] if numbers else -1


def _join(root: str, n: int) -> str:
    return f"{root.rstrip('/') or '/'}/{CHECKPOINT_PREFIX}.{n}"


def _check_status(train_status) -> int:
    if not isinstance(train_status, TrainStatus):
        raise InvalidArgumentError(
            f"{_tag()}save_check_point: train_status must be a TrainStatus (TrainStatus("
            f"epoch_no)), got {type(train_status).__name__}")
    epoch = train_status.epoch_no
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise InvalidArgumentError(
            f"{_tag()}save_check_point: TrainStatus.epoch_no must be an int, got {epoch!r}")
    return epoch


def _write(executor, directory: str, program, epoch: int) -> None:
    """The checkpoint's two files into `directory` (each written whole: AtomicFiles)."""
    io.save_persistables(executor, directory, program, filename=PARAM_FILE)
    with AtomicFiles(directory) as files:
        files.write(STATUS_FILE, text_writer(json.dumps({"epoch_no": epoch})))
    fsync_dir(directory)


def read_status(directory: str) -> TrainStatus:
    """The TrainStatus saved in the checkpoint `directory` (TrainStatus() without a file, as
    fluid does)."""
    path = os.path.join(directory, STATUS_FILE)
    if not os.path.isfile(path):
        return TrainStatus()
    with reading(directory) as manifest:
        text = read_text(path, manifest.get(STATUS_FILE))
    try:
        epoch = json.loads(text)["epoch_no"]
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidArgumentError(
            f"{_tag()}load_check_point: '{path}' is not a train status ({e!r}); expected "
            f'JSON like {{"epoch_no": 3}}. Delete that checkpoint directory to load the one '
            f"before it") from None
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise InvalidArgumentError(
            f"{_tag()}load_check_point: '{path}' holds epoch_no {epoch!r}; expected an int "
            f">= 0 (a saved epoch). Delete that checkpoint directory to load the one before it")
    return TrainStatus(epoch)


# -- local file systems ------------------------------------------------------------------------
def _private_name() -> str:
    return f".{CHECKPOINT_PREFIX}.{_host()}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


def _remove_dead_private_dirs(root: str) -> None:
    """Private directories of saves (and clean-ups) that died: this host's dead processes',
    another host's untouched for a day."""
    now, host = time.time(), _host()
    for name in os.listdir(root):
        parts = name.split(".")
        if not (name.startswith(f".{CHECKPOINT_PREFIX}.") and name.endswith(".tmp")
                and len(parts) == 6 and parts[3].isdigit()):
            continue
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            dead = (not _alive(int(parts[3])) if parts[2] == host
                    else now - os.stat(path).st_mtime > _OTHER_HOST_STALE_S)
            if dead:
                shutil.rmtree(path)


def _save_local(executor, root: str, program, epoch: int, keep_all: bool) -> str:
    os.makedirs(root, exist_ok=True)
    private = os.path.join(root, _private_name())
    os.mkdir(private)
    try:
        _write(executor, private, program, epoch)
        with _lock(root, exclusive=True):
            _remove_dead_private_dirs(root)
            target = _join(root, last_checkpoint_no(root) + 1)
            if os.path.lexists(target):  # a rename would replace an empty directory silently
                raise InvalidArgumentError(
                    f"{_tag()}save_check_point: '{target}' exists but is not a directory; "
                    f"move it away from '{root}'")
            os.rename(private, target)
            fsync_dir(root)
            if not keep_all:
                _clean_local(root, 1)
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    return target


def _clean_local(root: str, keep: int) -> None:
    """As fluid: delete by number (n <= newest - keep), not by count. Each goes to a private
    name first, so a kill mid-delete leaves no half checkpoint under a checkpoint's name."""
    with _lock(root, exclusive=True):  # a no-op inside a save, which holds it already
        numbers = _numbers(root, LocalFS())
        for n in numbers:
            if n <= numbers[-1] - keep:
                private = os.path.join(root, _private_name())
                os.rename(_join(root, n), private)
                fsync_dir(root)
                shutil.rmtree(private, ignore_errors=True)


# -- fleet's API -------------------------------------------------------------------------------
def save_check_point(executor, path: str, train_status: TrainStatus, main_program,
                     fs=None, local_cache_path: str = ".cache",
                     remain_all_checkpoint: bool = True) -> None:
    """Save every persistable of `main_program` and `train_status` as the next numbered
    checkpoint under `path`; with remain_all_checkpoint=False, then delete the older ones."""
    epoch = _check_status(train_status)
    fs = fs if fs is not None else LocalFS()
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"{_tag()}save_check_point: path must be a directory "
                                   f"path, got {path!r}")
    if not fs.need_upload_download():
        _save_local(executor, path, main_program, epoch, remain_all_checkpoint)
        return
    n = last_checkpoint_no(path, fs) + 1
    target = _join(path, n)
    cache = os.path.join(local_cache_path, f"{CHECKPOINT_PREFIX}.{n}.saved_cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    try:
        _write(executor, cache, main_program, epoch)
        fs.delete(target + ".tmp")
        fs.upload(cache, target + ".tmp")
        fs.mv(target + ".tmp", target)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if not remain_all_checkpoint:
        clean_redundant_check_points(path, fs, 1)


def load_check_point(executor, path: str, trainer_id: int, main_program, fs=None,
                     local_cache_path: str = ".cache", ignore_empty: bool = True):
    """Load the newest checkpoint under `path` into the global scope and return its
    TrainStatus; None when there is none (an error with ignore_empty=False)."""
    fs = fs if fs is not None else LocalFS()
    if not isinstance(trainer_id, int) or isinstance(trainer_id, bool):
        raise InvalidArgumentError(
            f"{_tag()}load_check_point: trainer_id must be an int (fleet.worker_index()), got "
            f"{trainer_id!r}")
    local = not fs.need_upload_download()
    with _lock(path, exclusive=False) if local else contextlib.nullcontext():
        n = last_checkpoint_no(path, fs)
        if n < 0:
            if not ignore_empty:
                raise CheckpointNotFoundError(
                    f"{_tag()}load_check_point: no checkpoint in '{path}' (no "
                    f"{CHECKPOINT_PREFIX}.<n> directory); save one with fleet.save_check_point "
                    f"or pass ignore_empty=True to start from scratch")
            return None
        if local:
            return _load_from(executor, _join(path, n), main_program)
    cache = os.path.join(local_cache_path, f"{CHECKPOINT_PREFIX}.{n}.load_cache.{trainer_id}")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(local_cache_path or ".", exist_ok=True)
    fs.download(_join(path, n), cache)
    try:
        return _load_from(executor, cache, main_program)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _load_from(executor, directory: str, program) -> TrainStatus:
    status = read_status(directory)  # checked first: a bad one changes nothing
    io.load_persistables(executor, directory, program, filename=PARAM_FILE)
    return status


def clean_redundant_check_points(root_path: str, fs=None, checkpoint_num: int = 1) -> None:
    """Delete the checkpoints under `root_path` numbered `checkpoint_num` or more below the
    newest (at least the newest is kept)."""
    fs = fs if fs is not None else LocalFS()
    keep = max(1, int(checkpoint_num))
    if not fs.need_upload_download():
        if os.path.isdir(root_path):
            _clean_local(root_path, keep)
        return
    numbers = _numbers(root_path, fs)
    if numbers:
        for n in numbers:
            if n <= numbers[-1] - keep:
                fs.delete(_join(root_path, n))

