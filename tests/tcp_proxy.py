"""A TCP proxy in front of a Redis that can stop forwarding: a network partition, made for real.

Clients connect to :attr:`TcpProxy.port`; each connection is piped to the target by two threads.
:meth:`stall` stops every pipe (connections stay open, bytes wait in the kernel's buffers, no
reply comes back: what a partition looks like to both sides), :meth:`heal` lets them flow again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self

_CHUNK = 65536


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> Self:
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def stall(self) -> None:
        """Stop forwarding, both ways, on every connection (new ones are accepted and stall too)."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        with self._lock:  # a connection accepted from now on is closed by _accept, not kept
            self._closed.set()
            sockets, self._sockets = self._sockets, []
        self._flowing.set()  # let the pipes see the end
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                # A client (a worker reconnecting) may get through while close() runs: its two
                # sockets would outlive the proxy unclosed, and warn in whatever test runs next.
                if self._closed.is_set():
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), name="proxy-pipe", daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while not self._closed.is_set():
                self._flowing.wait()  # a stalled pipe reads nothing: the bytes wait in the kernel
                data = src.recv(_CHUNK)
                if not data:
                    break
                self._flowing.wait()
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
