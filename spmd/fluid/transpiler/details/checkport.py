"""fluid.transpiler.details.checkport: wait_server_ready(endpoints).

>>> wait_server_ready([])        # nothing to wait for
"""
from __future__ import annotations

import socket
import sys
import time
from contextlib import closing

__all__ = ["wait_server_ready"]


def _listening(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, int(port))) == 0


def wait_server_ready(endpoints, retry_seconds: float = 3.0) -> None:
    """Return once every "host:port" in `endpoints` accepts a TCP connection, saying on stderr
    which are not ready between tries (as fluid does, every 3 seconds)."""
    if isinstance(endpoints, str):
        raise TypeError("wait_server_ready expects a list of 'host:port' endpoints, got a str")
    while True:
        waiting = [ep for ep in endpoints if not _listening(ep)]
        if not waiting:
            return
        sys.stderr.write(f"server not ready, wait {retry_seconds:g} sec to retry...\n"
                         f"not ready endpoints:{waiting}\n")
        sys.stderr.flush()
        time.sleep(retry_seconds)
