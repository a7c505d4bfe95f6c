"""NCCL's unique id between the forms cupy has used (no cupy needed): raw bytes travel over MPI,
and each cupy gets the form its NcclCommunicator takes (a tuple of ints before cupy 14, bytes
from 14 on, where get_unique_id returns bytes too)."""
from __future__ import annotations

import numpy as np
import pytest

from spmd.comm.nccl import unique_id_bytes, unique_id_for_cupy

RAW = bytes(range(0, 256, 2))  # 128 bytes, the high ones negative as signed chars


def test_both_forms_of_get_unique_id_give_the_same_bytes():
    as_tuple = tuple(int(b) for b in np.frombuffer(RAW, dtype=np.int8))
    assert min(as_tuple) < 0 <= max(as_tuple)
    assert unique_id_bytes(as_tuple) == RAW
    assert unique_id_bytes(RAW) == RAW
    assert unique_id_bytes(bytearray(RAW)) == RAW


@pytest.mark.parametrize("version, kind", [("12.3.0", tuple), ("13.6.0", tuple),
                                           ("14.0.0", bytes), ("14.2.0rc1", bytes),
                                           ("15.0.0", bytes)])
def test_each_cupy_gets_the_form_its_communicator_takes(version, kind):
    uid = unique_id_for_cupy(RAW, version)
    assert type(uid) is kind
    assert unique_id_bytes(uid) == RAW  # a round trip loses nothing
