"""tests/dist: the files under mpi/ run under `mpiexec -n N` (N in 1, 2, 4; 4 oversubscribes
this machine), launched by test_under_mpiexec.py (one pytest session per rank count), each
launch bounded by a timeout. A hang fails a test with the rank and the op it waited in:
SPMD_COLLECTIVE_TIMEOUT is set low, so a collective that cannot complete raises
CommunicationError naming both."""

collect_ignore = ["mpi"]  # collected only inside the mpiexec launches
