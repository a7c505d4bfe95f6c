"""Sleeps in a function named `napping` (the stack-dump test looks for it); --kill: SIGKILLs
itself instead; --exit N: sys.exit(N)."""
from __future__ import annotations

import os
import signal
import sys
import time


def napping():
    print("sleeping", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    if "--kill" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    if "--exit" in sys.argv:
        sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
    if "--raise" in sys.argv:
        raise ValueError("bad value\nsecond line")
    if "--args" in sys.argv:
        print("argv", sys.argv, flush=True)
        sys.exit(0)
    napping()
