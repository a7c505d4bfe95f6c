"""MPI imported but not initialized (launch.mpi asks for the vendor that way, in the same
process as a program): spmd's first MPI use initializes it instead of MPICH aborting the
process ("an MPI routine before initializing MPICH"). In a fresh interpreter, so this test's
process keeps its own MPI state."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
assert not MPI.Is_initialized()
import numpy as np
from spmd.comm.mpi import MPICommunicator
print(MPICommunicator().allgather(np.array([7], np.int64)).tolist(), MPI.Is_initialized())
"""


def test_spmd_initializes_an_mpi_imported_uninitialized():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[[7]] True"
