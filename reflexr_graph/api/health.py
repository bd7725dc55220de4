"""``/healthz`` (the process answers) and ``/readyz`` (and Redis answers): probes, with no token."""

from __future__ import annotations

import logging

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import Health
from reflexr_graph.api.problems import Problem
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.store.durability import durability_note

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the server answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Problem}})
async def readyz(client: ClientDep) -> Health:
    """Readiness: Redis answers (503 when it does not; the server's log says why).

    A Redis that may lose runs (it evicts keys, or persists nothing) is named in ``warning`` but
    keeps the answer 200: the API loses nothing itself, and taking it out of rotation would hide
    the console that shows the warning; ``health --redis`` is the probe that fails on it.
    """
    try:
        await client.ping()
    except StoreUnavailable as exc:
        # The probe needs no token, so its answer names no address: the log has the whole story.
        log.warning("readyz: %s; answering 503 until Redis answers", exc)
        raise StoreUnavailable(
            "Redis unavailable: check REFLEXR_REDIS_URL and that Redis is up (the server's log says why)",
            kind=exc.kind,
        ) from None
    return Health(status="ready", warning=durability_note(await client.durability()))
