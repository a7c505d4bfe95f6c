"""fluid.contrib.slim.nas.search_agent: SearchAgent, a light-NAS worker's client of the
ControllerServer (on this machine's loopback): update(tokens, reward) sends a reward and gets
the next tokens; next_tokens() asks for tokens. Each request is one connection under
`timeout` seconds."""
from __future__ import annotations

import socket

from .wire import check_loopback, encode_update, parse_tokens, read_line, send_line

__all__ = ["SearchAgent"]


class SearchAgent:
    """A client of the ControllerServer at server_ip (loopback), server_port; `key`
    identifies it to the server."""

    def __init__(self, server_ip=None, server_port=None, key=None, timeout=30.0):
        self.server_ip = check_loopback(server_ip, "SearchAgent")
        self.server_port = server_port
        self._key = key
        self._timeout = timeout

    def _request(self, data):
        if not self.server_port:
            raise ValueError("SearchAgent: the server's port is unknown (0 or None); give the "
                             "port the ControllerServer listens on")
        with socket.create_connection((self.server_ip, self.server_port),
                                      timeout=self._timeout) as conn:
            send_line(conn, data)
            reply = read_line(conn)
        if not reply:
            raise ConnectionError(f"SearchAgent: the controller at {self.server_ip}:"
                                  f"{self.server_port} closed without answering (wrong key, "
                                  f"or its search is over)")
        return parse_tokens(reply)

    def update(self, tokens, reward):
        """Report `reward` for `tokens`; returns the next tokens to try."""
        return self._request(encode_update(self._key, tokens, reward))

    def next_tokens(self):
        """The controller's next tokens."""
        return self._request("next_tokens")
