"""What the no-pickle tests share: a payload that runs code when it is unpickled, and a guard
that fails on any pickling or unpickling while it is on.

`detonator(path)` is the bytes of a pickle whose loading creates the directory `path` (the
harmless stand-in for "runs the sender's code"): a path that reads it and stays empty of that
directory did not unpickle it. `forbid_pickle()` replaces pickle's and _pickle's dump/load
functions and classes, and mpi4py's object serializer (MPI.pickle, what its lower-case
bcast/send/recv use), with ones that record the call and raise; whatever ran meanwhile and
finished without error moved no pickle, as long as the guard's `calls` stays empty (a server
thread may swallow the raise, so the tests assert `calls`, not only the absence of errors)."""
from __future__ import annotations

import _pickle
import contextlib
import os
import pickle
import pickletools

_DUMPS = pickle.dumps  # detonator() works inside forbid_pickle() too
_NAMES = ("dumps", "dump", "loads", "load", "Pickler", "Unpickler")


class _Detonator:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def detonator(path) -> bytes:
    """A pickle (protocol 2, what fluid writes) that makes the directory `path` when loaded."""
    return _DUMPS(_Detonator(str(path)), protocol=2)


def looks_like_a_pickle(data: bytes) -> bool:
    """Whether `data` parses as a whole pickle (PROTO ... STOP): what a wire must never carry."""
    if not data or data[:1] != b"\x80":
        return False
    try:
        ops = list(pickletools.genops(data))
    except Exception:  # noqa: BLE001 - any parse error: not a pickle
        return False
    return bool(ops) and ops[-1][0].name == "STOP"


class PickleGuard:
    def __init__(self):
        self.calls: list[str] = []


@contextlib.contextmanager
def forbid_pickle():
    """Within: every pickle dump or load (pickle, _pickle, mpi4py's MPI.pickle) is recorded in
    the yielded guard's `calls` and raises."""
    guard = PickleGuard()

    def refuse(where):
        def call(*args, **kwargs):
            guard.calls.append(where)
            raise AssertionError(f"{where} was called: a pickle crossed")
        return call

    saved = [(module, name, getattr(module, name)) for module in (pickle, _pickle)
             for name in _NAMES if hasattr(module, name)]
    for module, name, _ in saved:
        setattr(module, name, refuse(f"{module.__name__}.{name}"))
    mpi_pickle = _mpi_pickle()
    if mpi_pickle is not None:
        mpi_pickle.__init__(refuse("mpi4py MPI.pickle.dumps"), refuse("mpi4py MPI.pickle.loads"))
    try:
        yield guard
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        if mpi_pickle is not None:
            mpi_pickle.__init__(_DUMPS, pickle.loads)


def _mpi_pickle():
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.pickle
