"""The FastAPI app: routes, error handling, security, and the AsyncClient it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from reflexr_graph.api import (
    audit,
    console,
    dead_letters,
    graphs,
    health,
    overview,
    problems,
    runs,
    schedules,
    time_travel,
    waits,
    workers,
)
from reflexr_graph.api.roles import API_PREFIX, require_role
from reflexr_graph.api.security import (
    AuthFailures,
    BodyLimit,
    SecurityHeaders,
    require_json,
    require_token,
)
from reflexr_graph.api.sites import HostRules, RelativeRedirects, SiteGuard
from reflexr_graph.api.stream_slots import StreamSlots, share_of
from reflexr_graph.api.tokens import TokenBook, load_book
from reflexr_graph.client import AsyncClient
from reflexr_graph.config.settings import Settings, load_settings

API_ROUTERS: tuple[APIRouter, ...] = (
    runs.router,
    waits.router,
    waits.events_router,
    time_travel.router,
    dead_letters.router,
    schedules.router,
    graphs.router,
    workers.router,
    overview.router,
    audit.router,
)
"""The routers under ``/api``, each behind the token."""
OPEN_ROUTERS: tuple[APIRouter, ...] = (health.router, console.router)
"""The routers outside ``/api``: probes and the console page, which need no token."""


def create_app(
    settings: Settings | None = None,
    *,
    token: str | None = None,
    bound: tuple[str, int] | None = None,
    tokens: TokenBook | None = None,
) -> FastAPI:
    """The API and the console on the settings' Redis; the clients open with the app's lifespan.

    ``tokens`` guard ``/api`` (``serve`` always passes them); without them, the tokens of the
    settings' REFLEXR_API_TOKENS file and ``token`` (the settings' REFLEXR_API_TOKEN when None), an
    admin named ``admin``. An app made in process may have none, and then checks no token or role.
    ``bound`` is the address ``serve`` listens on, whose names the Host
    header must give (or one of REFLEXR_API_HOSTS); without one, loopback names only.
    """
    settings = settings or load_settings(strict=False)
    token = settings.api_token if token is None else token

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Created on the server's loop: redis.asyncio connections belong to one loop.
        app.state.client = AsyncClient(settings)
        app.state.streams = stream_client(settings)
        try:
            yield
        finally:
            await app.state.streams.close()
            await app.state.client.close()

    app = FastAPI(
        title="reflexr-graph",
        summary="Durable pydantic-graph runs: enqueue, follow, cancel, replay, and their dead letters.",
        version=_version(),
        lifespan=lifespan,
        # FastAPI's docs pages load their assets from a CDN; the console and /openapi.json need none.
        docs_url=None,
        redoc_url=None,
    )
    # Only the tokens' digests are kept, and compared (security.require_token).
    if tokens is None and (token or settings.api_tokens):
        tokens = load_book(settings.api_tokens, token)
    app.state.tokens = tokens
    app.state.auth_failures = AuthFailures()
    share = share_of(settings.max_streams, tokens=len(tokens) if tokens else 1)
    app.state.stream_slots = StreamSlots(settings.max_streams, share)
    # Set when the server starts to stop: the live event streams end at once (api/stream.py).
    app.state.stopping = asyncio.Event()
    api = APIRouter(
        prefix=API_PREFIX,
        dependencies=[Depends(require_token), Depends(require_role), Depends(require_json)],
    )
    for part in API_ROUTERS:
        api.include_router(part)
    app.include_router(api)
    for part in OPEN_ROUTERS:
        app.include_router(part)
    app.mount("/static", console.static_files(), name="static")
    problems.install(app)
    app.add_middleware(BodyLimit, limit=settings.api_max_body)
    app.add_middleware(RelativeRedirects)
    app.add_middleware(SiteGuard, rules=HostRules(bound, settings.api_hosts))
    app.add_middleware(SecurityHeaders)
    return app


def stream_client(settings: Settings) -> AsyncClient:
    """The client the event streams read on: a Redis pool of its own, as large as their cap, so
    that open streams never take the connections of the other routes."""
    return AsyncClient(settings, max_connections=settings.max_streams)


def _version() -> str:
    from importlib.metadata import version

    return version("reflexr-graph")
