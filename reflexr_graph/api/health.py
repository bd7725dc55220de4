"""``/healthz`` (the process answers) and ``/readyz`` (and Redis answers): probes, with no token."""

from __future__ import annotations

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import Health
from reflexr_graph.api.problems import Problem
from reflexr_graph.store.durability import durability_note

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the server answers."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Problem}})
async def readyz(client: ClientDep) -> Health:
    """Readiness: Redis answers (503 with what to fix when it does not).

    A Redis that may lose runs (it evicts keys, or persists nothing) is named in ``warning`` but
    keeps the answer 200: the API loses nothing itself, and taking it out of rotation would hide
    the console that shows the warning; ``health --redis`` is the probe that fails on it.
    """
    await client.ping()
    return Health(status="ready", warning=durability_note(await client.durability()))
