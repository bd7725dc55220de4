"""``/api/dead-letters``: dead runs with their errors, and replay by selection or by filter."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from reflexr_graph.api.deps import CallerDep, ClientDep, TagQuery
from reflexr_graph.api.models import (
    BulkReplayRequest,
    BulkReplayResult,
    CheckpointOut,
    DeadLetterOut,
    RunPageOut,
    refusals,
)
from reflexr_graph.api.problems import Problem
from reflexr_graph.core.tags import parse_tags

router = APIRouter(prefix="/dead-letters", tags=["dead letters"])


@router.get("", response_model=RunPageOut)
async def list_dead(
    client: ClientDep,
    graph: str | None = None,
    reason: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: str | None = None,
    tag: TagQuery = None,
) -> RunPageOut:
    """Dead-lettered runs, most recently dead first, a page at a time; ``?tag=k=v`` (repeatable)
    keeps those carrying every tag given."""
    page = await client.dead_letters_page(graph, reason, limit=limit, cursor=cursor, tags=parse_tags(tag))
    return RunPageOut(runs=page.runs, cursor=page.cursor)


@router.get("/{run_id}", response_model=DeadLetterOut, responses={404: {"model": Problem}})
async def show_dead(run_id: str, client: ClientDep) -> DeadLetterOut:
    """A run with its last error, the traceback of its last failed attempt and its checkpoint."""
    dead = await client.dead_letter(run_id)
    checkpoint = dead.checkpoint
    return DeadLetterOut(
        run=dead.run,
        traceback=dead.traceback,
        checkpoint=None if checkpoint is None else CheckpointOut(**checkpoint),
    )


@router.post("/replay", response_model=BulkReplayResult, responses={422: {"model": Problem}})
async def replay_many(body: BulkReplayRequest, client: ClientDep, caller: CallerDep) -> BulkReplayResult:
    """Replay the dead runs named by ``run_ids``, or every dead run of ``graph``, ``reason`` and/or
    ``tags`` (at most 1000 per call: call again for the rest). Runs that cannot be replayed are
    listed with why."""
    done = await client.replay_many(**body.model_dump(), by=caller.name)
    return BulkReplayResult(replayed=done.replayed, refused=refusals(done.refused))
