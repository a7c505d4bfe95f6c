"""How soon a parameter-server trainer's calls give up, by the clock: the timings the unit
tests used to assert (issue 25 item 7), measured here instead, where a loaded machine makes a
slow figure rather than a failed test. tests/unit/test_ps_rpc.py keeps what holds without a
clock (the error, the attempts, one request sent).

- no pserver listening, deadline 0.6 s: the retries end with "nothing answered" (bound 5 s)
- a server that accepts and never answers, deadline 0.5 s: the call ends (bound 5 s)
- a pserver that answered, then stopped: the next call fails at once (bound 10 s)

    python bench/fault_latency.py [--rounds 5] [--check]

Prints each case's median and worst seconds over the rounds; --check exits 1 when a worst
figure is over its bound.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time

import numpy as np

from spmd.ps.handler import InMemoryHandler
from spmd.ps.rpc import PServer, PServerClient, RpcError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(call) -> float:
    start = time.monotonic()
    try:
        call()
    except RpcError:
        return time.monotonic() - start
    raise SystemExit("the call succeeded: the case is set up wrong")


def nothing_listening() -> float:
    endpoint = f"127.0.0.1:{_free_port()}"
    return _timed(lambda: PServerClient(endpoint, 1, deadline=0.6)
                  .send_variables({"b": np.ones(3)}))


def never_answers() -> float:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"127.0.0.1:{silent.getsockname()[1]}"
        return _timed(lambda: PServerClient(endpoint, 0, deadline=0.5).get_variables(["w"]))


def stopped_pserver() -> float:
    server = PServer("127.0.0.1:0", InMemoryHandler({"b": np.zeros(3)}, 1), trainers=1).start()
    client = PServerClient(server.endpoint, 0, deadline=30)
    client.get_variables(["b"])
    server.stop(grace=None)
    return _timed(lambda: client.get_variables(["b"]))


CASES = [("no pserver listening (deadline 0.6 s)", nothing_listening, 5.0),
         ("a server that never answers (deadline 0.5 s)", never_answers, 5.0),
         ("a pserver that stopped (deadline 30 s)", stopped_pserver, 10.0)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when over a bound")
    args = parser.parse_args()
    over = []
    for what, case, bound in CASES:
        figures = [case() for _ in range(args.rounds)]
        worst = max(figures)
        print(f"{what}: median {statistics.median(figures):.3f} s, worst {worst:.3f} s "
              f"(bound {bound:g} s)")
        if worst > bound:
            over.append(what)
    if args.check and over:
        print("over the bound: " + "; ".join(over), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
