"""fluid.contrib.slim.nas.controller_server: ControllerServer, a controller (SAController)
behind a TCP socket on 127.0.0.1, serving the SearchAgents of light-NAS: 'next_tokens' gets
the controller's next tokens, '<key>\\t<tokens>\\t<reward>' updates it with a reward and gets
the next tokens; a message without the key is ignored. It stops after search_steps updates or
close(). Text lines only (nas/wire.py), never pickle; each connection is read under a timeout.

>>> from spmd.fluid.contrib.slim.searcher import SAController
>>> from spmd.fluid.contrib.slim.nas import SearchAgent
>>> sa = SAController(); sa.reset([3, 3], [1, 1])
>>> server = ControllerServer(sa, key="k"); _ = server.start()
>>> agent = SearchAgent(server.ip(), server.port(), key="k")
>>> tokens = agent.update([1, 1], 0.5)
>>> len(tokens), sa.iteration
(2, 1)
>>> server.close()
"""
from __future__ import annotations

import logging
import socket
import threading

from ....log_helper import get_logger
from .wire import check_loopback, parse_tokens, read_line, send_line

__all__ = ["ControllerServer"]

_logger = get_logger(__name__, logging.INFO,
                     fmt="ControllerServer-%(asctime)s-%(levelname)s: %(message)s")


class ControllerServer:
    """`controller` behind a socket at `address` (a loopback ip, port; port 0 picks a free
    one). `timeout`: how long a connection may take to send its line (seconds)."""

    def __init__(self, controller=None, address=("", 0), max_client_num=100,
                 search_steps=None, key=None, timeout=30.0):
        self._controller = controller
        self._ip = check_loopback(address[0], "ControllerServer")
        self._port = address[1]
        self._address = (self._ip, self._port)
        self._max_client_num = max_client_num
        self._search_steps = search_steps
        self._closed = threading.Event()
        self._key = key
        self._timeout = timeout
        self._socket_server = None
        self._thread = None

    def start(self):
        """Listen and serve in a background thread; returns the thread's description."""
        family = socket.AF_INET6 if ":" in self._ip else socket.AF_INET
        self._socket_server = socket.socket(family, socket.SOCK_STREAM)
        self._socket_server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket_server.bind(self._address)
        self._socket_server.listen(self._max_client_num)
        self._socket_server.settimeout(0.2)  # so that close() is seen promptly
        self._ip, self._port = self._socket_server.getsockname()[:2]
        _logger.info("listen on: [%s:%s]", self._ip, self._port)
        self._thread = threading.Thread(target=self.run, name="slim-nas-controller",
                                        daemon=True)
        self._thread.start()
        return str(self._thread)

    def close(self, timeout=5.0):
        """Stop serving (and wait up to `timeout` seconds for the thread)."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def closed(self):
        return self._closed.is_set() and (self._thread is None or not self._thread.is_alive())

    def port(self):
        return self._port

    def ip(self):
        return self._ip

    def _searching(self):
        steps = self._search_steps
        return not self._closed.is_set() and (
            steps is None or self._controller.iteration < steps)

    def run(self):
        try:
            while self._searching():
                try:
                    conn, addr = self._socket_server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(self._timeout)
                    try:
                        self._serve(conn, addr)
                    except (OSError, TimeoutError, ValueError) as e:
                        _logger.info("dropped a request from %s: %s", addr, e)
        finally:
            self._socket_server.close()
            self._closed.set()
            _logger.info("server closed")

    def _serve(self, conn, addr):
        message = read_line(conn).strip()
        if message == "next_tokens":
            tokens = self._controller.next_tokens()
        else:
            parts = message.split("\t")
            if len(parts) < 3 or parts[0] != self._key:
                _logger.info("ignored a message without the key from %s", addr)
                return
            tokens = parse_tokens(parts[1])
            self._controller.update(tokens, float(parts[2]))
            tokens = self._controller.next_tokens()
        send_line(conn, ",".join(str(int(t)) for t in tokens))
