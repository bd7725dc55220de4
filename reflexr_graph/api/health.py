"""``/healthz`` (the process answers) and ``/readyz`` (and Redis answers): probes, with no token."""

from __future__ import annotations

import logging

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import Health
from reflexr_graph.api.problems import Problem
from reflexr_graph.errors import StoreUnavailable

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the server answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Problem}})
async def readyz(client: ClientDep) -> Health:
    """Readiness: Redis answers (503 when it does not; the server's log says why)."""
    try:
        await client.ping()
    except StoreUnavailable as exc:
        # The probe needs no token, so its answer names no address: the log has the whole story.
        log.warning("readyz: %s; answering 503 until Redis answers", exc)
        raise StoreUnavailable(
            "Redis unavailable: check REFLEXR_REDIS_URL and that Redis is up (the server's log says why)",
            kind=exc.kind,
        ) from None
    return Health(status="ready")
