"""``reflexr-graph serve``: the API and the console under uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from reflexr_graph.api.app import create_app
from reflexr_graph.api.security import check_bind
from reflexr_graph.config.settings import Settings

log = logging.getLogger(__name__)


def console_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until interrupted; SettingsError when ``host`` is not loopback and there is no token."""
    check_bind(host, settings.api_token)
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
    uvicorn.Server(config).run()
