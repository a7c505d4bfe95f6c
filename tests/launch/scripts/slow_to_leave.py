"""A rank that is slow to leave: an mpi4py program (no spmd) that takes part in the stand-ins'
start of a job whose spmd ranks all ended before MPI (spmd/guard/stand_in.py: one all-gather
of who is present, this rank absent too), finalizes MPI, and only then, a moment later, exits.
The process manager must let it: the stand-ins finalized before they exited."""
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
table = np.zeros((comm.Get_size(), 3), dtype=np.int64)
comm.Iallgather(np.zeros(3, dtype=np.int64), table).Wait()  # absent, as every rank is
MPI.Finalize()
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
print("slow rank left after the others", flush=True)
