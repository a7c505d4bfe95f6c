"""InMemoryDataset.global_shuffle over MPI: every trainer sends each of its records to a
trainer drawn at random, then shuffles what it received, so each trainer ends with its share of
a shuffle of the union (fluid 1.8 does the same through its pslib client-to-client messages).

Records travel as raw bytes (a count table, then each slot's values), never pickled.
"""
from __future__ import annotations

import numpy as np

from ..errors import PreconditionError


def encode(records, slots) -> bytes:
    """`records` (tuples of 1-D arrays, one per slot) as bytes."""
    counts = np.array([[r[i].size for i in range(len(slots))] for r in records],
                      dtype=np.int64).reshape(len(records), len(slots))
    parts = [np.array([len(records)], np.int64).tobytes(), counts.tobytes()]
    for i, slot in enumerate(slots):
        values = [r[i] for r in records]
        parts.append(np.concatenate(values).astype(slot.dtype, copy=False).tobytes()
                     if values else b"")
    return b"".join(parts)


def decode(data: bytes, slots) -> list:
    """The records `encode` made `data` of (possibly several encodings laid end to end)."""
    records, pos, view = [], 0, memoryview(data)
    while pos < len(data):
        n = int(np.frombuffer(view[pos:pos + 8], np.int64)[0])
        pos += 8
        counts = np.frombuffer(view[pos:pos + 8 * n * len(slots)], np.int64).reshape(
            n, len(slots))
        pos += counts.nbytes
        columns = []
        for i, slot in enumerate(slots):
            total = int(counts[:, i].sum())
            width = slot.dtype.itemsize
            values = np.frombuffer(view[pos:pos + total * width], slot.dtype).copy()
            pos += total * width
            columns.append(np.split(values, np.cumsum(counts[:, i])[:-1]) if n else [])
        records.extend(tuple(col[k] for col in columns) for k in range(n))
    return records


def exchange(records, slots, rng, trainers: int) -> list:
    """This trainer's records after the global shuffle among `trainers` MPI ranks."""
    from ..comm.mpi import world
    from ..comm.topology import detect

    topo = detect()
    if topo.size != trainers:
        raise PreconditionError(
            f"{topo.tag()} InMemoryDataset.global_shuffle: fleet says {trainers} trainers, but "
            f"MPI connects {topo.size} processes; start one process per trainer (mpirun -n "
            f"{trainers} or paddle-launch) so the trainers can exchange their records")
    comm = world()
    dest = rng.integers(0, trainers, size=len(records))
    outgoing = [encode([r for r, d in zip(records, dest) if d == k], slots)
                for k in range(trainers)]
    send_counts = np.array([len(b) for b in outgoing], np.int64)
    recv_counts = np.empty(trainers, np.int64)
    comm.Alltoall(send_counts, recv_counts)
    from mpi4py import MPI

    send = np.frombuffer(b"".join(outgoing), np.uint8)
    recv = np.empty(int(recv_counts.sum()), np.uint8)
    comm.Alltoallv([send, (send_counts.tolist(), _displacements(send_counts)), MPI.BYTE],
                   [recv, (recv_counts.tolist(), _displacements(recv_counts)), MPI.BYTE])
    received = decode(recv.tobytes(), slots)
    order = rng.permutation(len(received))
    return [received[i] for i in order]


def _displacements(counts) -> list:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
