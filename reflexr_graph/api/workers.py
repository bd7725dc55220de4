"""``/api/workers``: the live workers, what each serves and holds now, and its last heartbeat."""

from __future__ import annotations

from fastapi import APIRouter

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.model import WorkerStatus

router = APIRouter(prefix="/workers", tags=["workers"])


@router.get("", response_model=list[WorkerStatus])
async def list_workers(client: ClientDep) -> list[WorkerStatus]:
    """Every live worker, by name: its host, pool, concurrency, graphs and version, the runs in
    flight on it and its last heartbeat (epoch seconds)."""
    return await client.worker_statuses()
