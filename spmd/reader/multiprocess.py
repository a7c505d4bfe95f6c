"""paddle.reader.multiprocess_reader: run several readers in forked child processes.

Samples cross the process boundary without pickle: each is framed as a small JSON header that
describes its structure (lists, tuples, dicts with str keys, numbers, strings, None, numpy
arrays and scalars) followed by the raw bytes of each array, over one pipe per child. Unlike
fluid, whose pipe mode sends JSON (tuples arrive as lists, arrays are refused), samples arrive
with their Python and numpy types intact.

>>> def part(k):
...     return lambda: iter([(k, i) for i in range(2)])
>>> sorted(multiprocess_reader([part(0), part(1)])())
[(0, 0), (0, 1), (1, 0), (1, 1)]
"""
from __future__ import annotations

import json
import multiprocessing
import traceback
from multiprocessing.connection import wait

import numpy as np

from ..errors import InvalidArgumentError, SpmdError

__all__ = ["multiprocess_reader"]

# fork, as fluid: reader creators are closures, which no other start method can ship
_FORK = multiprocessing.get_context("fork")


class MultiprocessReaderError(SpmdError, ValueError):
    """A reader running in a child process raised; the message holds its traceback (a
    ValueError, as fluid's)."""


def _describe(value, arrays: list):
    """The JSON-ready header for `value`; array payloads are appended to `arrays`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if not array.flags.c_contiguous:  # (ascontiguousarray would make a scalar 1-d)
            array = np.ascontiguousarray(array)
        if array.dtype.hasobject:
            raise InvalidArgumentError(
                "multiprocess_reader: a sample holds an object array; yield numeric arrays")
        arrays.append(array)
        return {"a": array.dtype.str, "s": list(array.shape), "g": isinstance(value, np.generic)}
    if isinstance(value, (list, tuple)):
        items = [_describe(v, arrays) for v in value]
        return {"t": items} if isinstance(value, tuple) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"d": {k: _describe(v, arrays) for k, v in value.items()}}
    raise InvalidArgumentError(
        f"multiprocess_reader: cannot send a {type(value).__name__} between processes; "
        f"samples may hold numbers, strings, None, numpy arrays and lists/tuples/dicts of them")


def _rebuild(header, arrays):
    if isinstance(header, list):
        return [_rebuild(h, arrays) for h in header]
    if not isinstance(header, dict):
        return header
    if "t" in header:
        return tuple(_rebuild(h, arrays) for h in header["t"])
    if "d" in header:
        return {k: _rebuild(h, arrays) for k, h in header["d"].items()}
    array = np.frombuffer(next(arrays), dtype=np.dtype(header["a"])).reshape(header["s"]).copy()
    return array[()] if header["g"] else array


def _send(conn, kind: str, value=None):
    arrays: list = []
    header = _describe(value, arrays)
    conn.send_bytes(json.dumps({"k": kind, "n": len(arrays), "v": header}).encode())
    for array in arrays:
        conn.send_bytes(memoryview(array).cast("B") if array.size else b"")


def _receive(conn):
    message = json.loads(conn.recv_bytes().decode())
    payloads = iter([conn.recv_bytes() for _ in range(message["n"])])
    return message["k"], _rebuild(message["v"], payloads)


def _child(reader, conn, slots):
    try:
        for sample in reader():
            if sample is None:
                raise InvalidArgumentError("multiprocess_reader: a reader yielded None")
            if slots is not None:
                slots.acquire()  # queue mode: at most queue_size samples in flight
            _send(conn, "sample", sample)
        _send(conn, "end")
    except BaseException:  # noqa: BLE001 - the parent raises it with this traceback
        _send(conn, "error", traceback.format_exc())
    finally:
        conn.close()


def multiprocess_reader(readers, use_pipe=True, queue_size=1000):
    """Run each reader creator of the list `readers` in its own forked process and yield all
    their samples. use_pipe=True takes one sample from each reader in turn (round robin, as
    fluid); use_pipe=False takes samples as they come, at most `queue_size` waiting. A child
    that raises ends the iteration with MultiprocessReaderError (a ValueError) carrying its
    traceback.

    >>> list(multiprocess_reader([lambda: iter([1, 2])], use_pipe=False)())
    [1, 2]
    """
    if not isinstance(readers, list) or not readers:
        raise InvalidArgumentError(
            f"multiprocess_reader: readers must be a non-empty list of reader creators, "
            f"got {readers!r}")
    if int(queue_size) <= 0:
        raise InvalidArgumentError(f"multiprocess_reader: queue_size must be > 0, got {queue_size}")

    def start():
        slots = None if use_pipe else _FORK.Semaphore(int(queue_size))
        conns, procs = [], []
        for reader in readers:
            parent, child = _FORK.Pipe(duplex=False)
            proc = _FORK.Process(target=_child, args=(reader, child, slots), daemon=True)
            proc.start()
            child.close()  # the parent keeps only its end, so a dead child reads as EOF
            conns.append(parent)
            procs.append(proc)
        return conns, procs, slots

    def take(conn, slots):
        try:
            kind, value = _receive(conn)
        except EOFError:
            raise MultiprocessReaderError(
                "multiprocess_reader: a reader process died without sending its end (killed, "
                "or out of memory)") from None
        if kind == "error":
            raise MultiprocessReaderError(
                f"multiprocess_reader: a reader raised in its process:\n{value}")
        if kind == "sample" and slots is not None:
            slots.release()
        return kind, value

    def read():
        conns, procs, slots = start()
        live = list(conns)
        try:
            while live:
                ready = live if use_pipe else wait(live)
                for conn in list(ready):
                    kind, value = take(conn, slots)
                    if kind == "end":
                        live.remove(conn)
                    else:
                        yield value
        finally:
            for conn in conns:
                conn.close()
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
                proc.join()

    return read
