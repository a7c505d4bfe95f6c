"""A fluid data-parallel training program in which one rank misbehaves, for the fault matrix
(tests/launch/fault_matrix.py): --fault picks how, --rank which rank (-1: the last), --step
when (-1: before MPI starts, before the program's first spmd call that needs it; -2: during
the job's MPI start-up, while spmd's MPI_Init runs).

    mpiexec -n 2 python faults.py --fault os_exit0 --rank 1 --step 2
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import spmd.fluid as fluid
from spmd.comm.topology import detect

FAULTS = ("ok", "raise", "sigkill", "sigterm", "exit3", "exit0", "os_exit0", "hang",
          "extra_step", "differ", "nan_feed", "empty_feed", "raise_own_mpi", "os_exit0_own_mpi",
          "kill_in_save", "bad_checkpoint")
OWN_MPI = "_own_mpi"  # the fault happens while the others wait in the program's own mpi4py call


def build(hidden: int):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 8], "float32")
        y = fluid.data("y", [-1, 1], "float32")
        h = fluid.layers.fc(x, hidden, act="relu")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


def batch(step: int, rank: int, rows: int = 8):
    rng = np.random.default_rng(100 * step + rank)
    x = rng.normal(size=(rows, 8)).astype("float32")
    return {"x": x, "y": x.sum(1, keepdims=True).astype("float32")}


def misbehave(fault: str, rank: int, step: int):
    """Do `fault` now; returns the feed to use for faults that are about the feed."""
    if fault == "raise":
        raise ZeroDivisionError(f"rank {rank} failed on purpose at step {step}")
    if fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if fault == "exit3":
        sys.exit(3)
    if fault == "exit0":
        sys.exit(0)
    if fault == "os_exit0":
        os._exit(0)
    if fault == "hang":
        time.sleep(3600)
    if fault == "nan_feed":
        feed = batch(step, rank)
        feed["x"][0, 0] = np.nan
        return feed
    if fault == "empty_feed":
        feed = batch(step, rank)
        return {k: v[:0] for k, v in feed.items()}
    return None


def misbehave_in_mpi_start(fault: str, rank: int):
    """Do `fault` as soon as spmd's MPI start-up has begun (its MPI_Init thread runs), from a
    watcher thread: a signal or an exit at once, an exception or sys.exit in the main thread
    (through a signal handler, which runs in the main thread's start-up wait)."""
    import threading

    def in_main_thread(signum, frame):
        misbehave(fault, rank, -2)

    signal.signal(signal.SIGALRM, in_main_thread)

    def watch():
        while not any(t.name == "spmd-mpi-init" for t in threading.enumerate()):
            time.sleep(0.001)
        if fault in ("raise", "exit0", "exit3"):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
        else:
            misbehave(fault, rank, -2)

    threading.Thread(target=watch, daemon=True).start()


def checkpoint(fault: str, exe, program, directory: str, rank: int, step: int):
    """kill_in_save: the misbehaving rank saves a checkpoint at step 0, and is SIGKILLed in the
    middle of saving the next one (at the third move of the save: spmd/io/files.py).
    bad_checkpoint: it saves one, a file of it is overwritten with random bytes, it loads."""
    if step == 0:
        fluid.io.save_persistables(exe, directory, program)
    elif fault == "kill_in_save":
        os.environ["SPMD_TEST_KILL_AT_FS_STEP"] = "3"
        fluid.io.save_persistables(exe, directory, program)
    else:
        with open(os.path.join(directory, "fc_0.w_0.npy"), "wb") as f:
            f.write(np.random.default_rng(rank).bytes(300))
        fluid.io.load_persistables(exe, directory, program)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=FAULTS, default="ok")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--step", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--token", default="", help="marks the test's processes; unused here")
    p.add_argument("--ckpt", default="", help="the checkpoint directory of the save faults")
    args = p.parse_args()
    if args.step < 0:  # before MPI starts: the rank is the launcher's, MPI not yet loaded
        from spmd.comm.topology import launcher_rank_size

        rank, size = launcher_rank_size()
        if args.rank % size == rank and args.step == -2:
            misbehave_in_mpi_start(args.fault, rank)
        elif args.rank % size == rank:
            misbehave(args.fault.replace(OWN_MPI, ""), rank, args.step)
    t = detect()
    bad = args.rank % t.size == t.rank
    hidden = 16 if (args.fault == "differ" and bad) else 32
    main_prog, startup, loss = build(hidden)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    compiled = fluid.CompiledProgram(main_prog).with_data_parallel(loss_name=loss.name)
    steps = args.steps + (1 if args.fault == "extra_step" and bad else 0)
    for step in range(steps):
        feed = batch(step, t.rank)
        if args.fault.endswith(OWN_MPI) and step == args.step:
            if bad:
                misbehave(args.fault[:-len(OWN_MPI)], t.rank, step)
            from mpi4py import MPI

            total = np.ones(1)
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, total)
        elif args.fault in ("kill_in_save", "bad_checkpoint"):
            if bad and step in (0, args.step):
                checkpoint(args.fault, exe, main_prog, args.ckpt, t.rank, step)
        elif bad and step == args.step:
            feed = misbehave(args.fault, t.rank, step) or feed
        value, = exe.run(compiled, feed=feed, fetch_list=[loss])
        print(f"rank {t.rank}/{t.size} step {step} loss {float(value.item()):.4f}", flush=True)
    print(f"rank {t.rank}/{t.size} done", flush=True)


if __name__ == "__main__":
    main()
