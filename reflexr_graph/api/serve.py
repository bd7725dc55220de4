"""``reflexr-graph serve``: the API and the console under uvicorn."""

from __future__ import annotations

import asyncio
import errno
import logging
import secrets
import socket

import uvicorn

from reflexr_graph.api.app import create_app
from reflexr_graph.api.security import check_bind, check_token
from reflexr_graph.api.tokens import load_book
from reflexr_graph.config.settings import Settings
from reflexr_graph.errors import CannotListen

log = logging.getLogger(__name__)


def console_url(host: str, port: int, token: str = "") -> str:
    """The console's address; with ``token``, one that hands the console the token (in the
    fragment, which the browser never sends: the console keeps it and clears the address bar)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"#token={token}" if token else "")


BACKLOG = 2048
"""Connections the listening socket queues before uvicorn accepts them (uvicorn's default)."""
GENERATED_TOKEN_BYTES = 32
"""The randomness of a token ``serve`` makes when none is set (43 characters, URL-safe)."""
SHUTDOWN_GRACE_S = 5
"""How long a stopping server (SIGTERM, Ctrl-C) lets open requests finish before it closes them."""


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
    """Serve until interrupted; SettingsError when the token is too short, the tokens file is
    malformed (naming its line), or ``host`` is not loopback and there is no token, CannotListen
    when the address cannot be bound (before anything is printed). With neither REFLEXR_API_TOKEN
    nor REFLEXR_API_TOKENS it generates a token and prints the console's URL with it."""
    check_token(settings.api_token)
    check_bind(host, settings.api_token or bool(settings.api_tokens))
    generated = not (settings.api_token or settings.api_tokens)
    token = secrets.token_urlsafe(GENERATED_TOKEN_BYTES) if generated else settings.api_token
    tokens = load_book(settings.api_tokens, token)
    sock = listen(host, port)
    app = create_app(settings, token=token, bound=(host, port), tokens=tokens)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        # No Server header naming the software; the app sets its own security headers.
        server_header=False,
        proxy_headers=False,
        # A backstop: the event streams end when the server stops (_Server), and any other
        # request still open after this is cut rather than keeping a stopped server up.
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    if not generated:
        url = console_url(host, port)
        print(f"reflexr-graph console: {url} (API under /api, Ctrl-C to stop)", flush=True)
    else:
        # Printed once, here only: it is this process's, and a restart makes another.
        print(
            f"reflexr-graph console: {console_url(host, port, token)} (API under /api with this token, "
            "generated for this server since REFLEXR_API_TOKEN is not set; Ctrl-C to stop)",
            flush=True,
        )
    _Server(config, app.state.stopping).run(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn's server, which first tells the app's live event streams to end when it stops:
    uvicorn's graceful shutdown waits for every open response, and a console left open holds
    a run's stream for as long as the run goes on."""

    def __init__(self, config: uvicorn.Config, stopping: asyncio.Event) -> None:
        super().__init__(config)
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.stopping.set()
        await super().shutdown(sockets)
