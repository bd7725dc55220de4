"""``/api/overview``: the fleet now and over the last hour, for the console's home page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.model import Activity, Overview
from reflexr_graph.store.activity import MAX_MINUTES
from reflexr_graph.store.durability import durability_note

router = APIRouter(prefix="/overview", tags=["overview"])


class OverviewOut(BaseModel):
    """The fleet now (runs by status, queues per graph, workers, dead letters) and its activity
    per minute over the window asked for."""

    now: Overview
    activity: Activity
    redis_warning: str | None = None
    """How the store's Redis may lose runs (store/durability.py), or that CONFIG could not be read;
    the console shows it as a banner."""


@router.get("", response_model=OverviewOut)
async def get_overview(
    client: ClientDep,
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES, description="The window, in minutes")] = 60,
) -> OverviewOut:
    """Runs by status now, queued runs per graph with their oldest, the live workers and the
    dead letters; and per minute: runs started, succeeded, dead-lettered and retried, dead
    letters by reason, p50/p95 durations per graph and the runs waiting by reason."""
    return OverviewOut(
        now=await client.overview(),
        activity=await client.activity(minutes),
        redis_warning=durability_note(await client.durability()),
    )
