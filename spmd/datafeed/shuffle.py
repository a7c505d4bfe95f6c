"""InMemoryDataset.global_shuffle over MPI: every trainer sends each of its records to a
trainer drawn at random, then shuffles what it received, so each trainer ends with its share of
a shuffle of the union (fluid 1.8 does the same through its pslib client-to-client messages).

Records travel as raw bytes (a count table, then each slot's values), never pickled.
"""
from __future__ import annotations

import numpy as np

from ..errors import PreconditionError
from .table import RecordTable


def encode(table) -> bytes:
    """A RecordTable as bytes: its record count, then per slot the records' value counts and
    the values."""
    parts = [np.array([len(table)], np.int64).tobytes()]
    for i, slot in enumerate(table.slots):
        parts.append(table.counts(i).astype(np.int64).tobytes())
        parts.append(table.columns[i][0].astype(slot.dtype, copy=False).tobytes())
    return b"".join(parts)


def decode(data: bytes, slots) -> RecordTable:
    """The records `encode` wrote into `data` (several encodings laid end to end)."""
    tables, pos, view = [RecordTable.empty(slots)], 0, memoryview(data)
    while pos < len(data):
        n = int(np.frombuffer(view[pos:pos + 8], np.int64)[0])
        pos += 8
        values, counts = [], []
        for slot in slots:
            slot_counts = np.frombuffer(view[pos:pos + 8 * n], np.int64).copy()
            pos += 8 * n
            size = int(slot_counts.sum()) * slot.dtype.itemsize
            values.append(np.frombuffer(view[pos:pos + size], slot.dtype).copy())
            pos += size
            counts.append(slot_counts)
        tables.append(RecordTable.from_counts(slots, values, counts))
    return RecordTable.concat(tables)


def exchange(records: RecordTable, slots, rng, trainers: int) -> RecordTable:
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
    outgoing = [encode(records.take(np.flatnonzero(dest == k))) for k in range(trainers)]
    send_counts = np.array([len(b) for b in outgoing], np.int64)
    recv_counts = np.empty(trainers, np.int64)
    comm.Alltoall(send_counts, recv_counts)
    from mpi4py import MPI

    send = np.frombuffer(b"".join(outgoing), np.uint8)
    recv = np.empty(int(recv_counts.sum()), np.uint8)
    comm.Alltoallv([send, (send_counts.tolist(), _displacements(send_counts)), MPI.BYTE],
                   [recv, (recv_counts.tolist(), _displacements(recv_counts)), MPI.BYTE])
    received = decode(recv.tobytes(), slots)
    return received.take(rng.permutation(len(received)))


def _displacements(counts) -> list:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
