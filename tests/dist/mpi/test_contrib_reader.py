"""fluid.contrib.reader.distributed_batch_reader at any rank count: trainer r keeps batches r,
r + N, r + 2N, ... of each complete group of N, as fluid 1.8 deals them."""
from __future__ import annotations

import pytest

import spmd.fluid as fluid
from spmd.comm.topology import detect

pytestmark = pytest.mark.mpi(min_size=1)


def test_each_trainer_keeps_its_batch_of_every_group():
    t = detect()
    total = 3 * t.size + 1  # with several trainers the last, incomplete group is dropped

    def batches():
        for i in range(total):
            yield [i]

    mine = list(fluid.contrib.reader.distributed_batch_reader(batches)())
    assert mine == [[g * t.size + t.rank] for g in range(total // t.size)]
