"""Start N trainers as plain processes, each with fluid's PADDLE_* variables only (no MPI
launcher), as fluid's own launcher, Kubernetes pods and Paddle's test harness start them; wait
for all. For the fault matrix's env-only cases (tests/launch/fault_matrix.py).

    python plain_trainers.py N script.py [args...]

Each trainer's output goes to this process's stdout and stderr, unchanged. Exits with the
first non-zero exit code (128 + signal for a signal). A trainer still running STOP_AFTER_S after
another failed is stopped, said on stderr ("plain_trainers: stopping ..."): spmd should have
ended it first, except when it hangs in the user's own code.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

STOP_AFTER_S = 20.0


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def main(argv: list[str]) -> int:
    n, program = int(argv[0]), argv[1:]
    endpoints = [f"127.0.0.1:{p}" for p in free_ports(n)]
    procs = []
    for trainer in range(n):
        env = dict(os.environ, PADDLE_TRAINER_ID=str(trainer), PADDLE_TRAINERS_NUM=str(n),
                   PADDLE_TRAINER_ENDPOINTS=",".join(endpoints),
                   PADDLE_CURRENT_ENDPOINT=endpoints[trainer])
        procs.append(subprocess.Popen([sys.executable, *program], env=env,
                                      stdin=subprocess.DEVNULL))
    codes: dict[int, int] = {}
    failed_at = None
    while len(codes) < n:
        for trainer, proc in enumerate(procs):
            if trainer not in codes and proc.poll() is not None:
                code = proc.returncode
                codes[trainer] = 128 - code if code < 0 else code
                if codes[trainer] and failed_at is None:
                    failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > STOP_AFTER_S:
            running = [t for t in range(n) if t not in codes]
            print(f"plain_trainers: stopping trainer(s) {running}, still running "
                  f"{STOP_AFTER_S:g} s after another failed", file=sys.stderr, flush=True)
            for t in running:
                procs[t].send_signal(signal.SIGTERM)
            failed_at = time.monotonic() + 3600
        time.sleep(0.05)
    return next((codes[t] for t in range(n) if codes[t]), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
