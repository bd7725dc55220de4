"""The TLS connection of ``rediss://`` URLs: its handshake is part of connecting.

redis-py sets the socket's read timeout before the TLS handshake, so a ``rediss://`` URL
aimed at a plain Redis port (which waits for a command and never answers the TLS hello)
hung for the whole read timeout (10 s in the CLI) before failing. Here the handshake gets
the connect timeout, as the TCP connect does, and the read timeout applies afterwards.
"""

from __future__ import annotations

import socket
import ssl
from typing import cast

import redis


class HandshakeBoundSSLConnection(redis.SSLConnection):
    """An SSLConnection whose TLS handshake must finish within ``socket_connect_timeout``."""

    def _wrap_socket_with_ssl(self, sock: socket.socket) -> ssl.SSLSocket:
        connect_timeout = self.socket_connect_timeout
        if connect_timeout:
            sock.settimeout(connect_timeout)
        wrapped = cast(ssl.SSLSocket, super()._wrap_socket_with_ssl(sock))  # type: ignore[no-untyped-call]
        wrapped.settimeout(self.socket_timeout)
        return wrapped
