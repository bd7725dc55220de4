"""The FastAPI app: routes, error handling, security, and the AsyncClient it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from reflexr_graph.api import (
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
from reflexr_graph.api.security import BodyLimit, SecurityHeaders, require_json, require_token
from reflexr_graph.client import AsyncClient
from reflexr_graph.config.settings import Settings, load_settings

API_PREFIX = "/api"
API_ROUTERS: tuple[APIRouter, ...] = (
    runs.router,
    waits.router,
    time_travel.router,
    dead_letters.router,
    schedules.router,
    graphs.router,
    workers.router,
    overview.router,
)
"""The routers under ``/api``, each behind the token."""
OPEN_ROUTERS: tuple[APIRouter, ...] = (health.router, console.router)
"""The routers outside ``/api``: probes and the console page, which need no token."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API and the console on the settings' Redis; the client opens with the app's lifespan."""
    settings = settings or load_settings(strict=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Created on the server's loop: redis.asyncio connections belong to one loop.
        app.state.client = AsyncClient(settings)
        try:
            yield
        finally:
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
    app.state.api_token = settings.api_token
    # Set when the server starts to stop: the live event streams end at once (api/stream.py).
    app.state.stopping = asyncio.Event()
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_token), Depends(require_json)])
    for part in API_ROUTERS:
        api.include_router(part)
    app.include_router(api)
    for part in OPEN_ROUTERS:
        app.include_router(part)
    app.mount("/static", console.static_files(), name="static")
    problems.install(app)
    app.add_middleware(BodyLimit, limit=settings.api_max_body)
    app.add_middleware(SecurityHeaders)
    return app


def _version() -> str:
    from importlib.metadata import version

    return version("reflexr-graph")
