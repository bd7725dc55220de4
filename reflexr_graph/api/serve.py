"""``reflexr-graph serve``: the API and the console under uvicorn."""

from __future__ import annotations

import errno
import logging
import socket

import uvicorn

from reflexr_graph.api.app import create_app
from reflexr_graph.api.security import check_bind
from reflexr_graph.config.settings import Settings
from reflexr_graph.errors import CannotListen

log = logging.getLogger(__name__)


def console_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


BACKLOG = 2048
"""Connections the listening socket queues before uvicorn accepts them (uvicorn's default)."""


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or CannotListen saying why in one line.

    Bound here rather than by uvicorn, which logs the raw OSError after the ready line and exits
    3, the CLI's code for an unreachable Redis. Connections that arrive before uvicorn starts
    wait in the backlog, so the ready line printed after this is true.
    """
    bare = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET, socket.SOCK_STREAM)
    # As uvicorn does: a restart may bind at once while the last run's connections are in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "the port is in use by another process; stop it, or serve on another with --port"
        else:
            why = f"{exc.strerror or type(exc).__name__}; check --host and --port"
        raise CannotListen(f"cannot listen on {console_url(host, port)}: {why}") from None
    sock.set_inheritable(True)
    return sock


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until interrupted; SettingsError when ``host`` is not loopback and there is no token,
    CannotListen when the address cannot be bound (before anything is printed)."""
    check_bind(host, settings.api_token)
    sock = listen(host, port)
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        # No Server header naming the software; the app sets its own security headers.
        server_header=False,
        proxy_headers=False,
    )
    print(f"reflexr-graph console: {console_url(host, port)} (API under /api, Ctrl-C to stop)", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
