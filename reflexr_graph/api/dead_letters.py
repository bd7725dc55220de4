"""``/api/dead-letters``: dead runs with their errors, and replay by selection or by filter."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from reflexr_graph import errors
from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.models import (
    BulkReplayRequest,
    BulkReplayResult,
    CheckpointOut,
    DeadLetterOut,
    Refusal,
    RunPageOut,
)
from reflexr_graph.api.problems import Problem

router = APIRouter(prefix="/dead-letters", tags=["dead letters"])

BULK_LIMIT = 1000
"""The most runs one bulk replay touches; narrow the filter, or call again, for more."""


@router.get("", response_model=RunPageOut)
async def list_dead(
    client: ClientDep,
    graph: str | None = None,
    reason: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: str | None = None,
) -> RunPageOut:
    """Dead-lettered runs, most recently dead first, a page at a time."""
    page = await client.dead_letters_page(graph, reason, limit=limit, cursor=cursor)
    return RunPageOut(runs=page.runs, cursor=page.cursor)


@router.get("/{run_id}", response_model=DeadLetterOut, responses={404: {"model": Problem}})
async def show_dead(run_id: str, client: ClientDep) -> DeadLetterOut:
    """A run with its last error, the traceback of its last failed attempt and its checkpoint."""
    info = await client.get(run_id)
    checkpoint = await client.checkpoint_info(run_id)
    return DeadLetterOut(
        run=info,
        traceback=await client.traceback(run_id),
        checkpoint=None if checkpoint is None else CheckpointOut(**checkpoint),
    )


@router.post("/replay", response_model=BulkReplayResult, responses={422: {"model": Problem}})
async def replay_many(body: BulkReplayRequest, client: ClientDep) -> BulkReplayResult:
    """Replay the dead runs named by ``run_ids``, or every dead run of ``graph`` and/or ``reason``
    (at most 1000 per call). Runs that cannot be replayed are listed with why."""
    if body.run_ids is not None and (body.graph or body.reason):
        raise errors.InvalidInputs(
            "give run_ids or a filter (graph, reason), not both",
            [
                {
                    "loc": ["body", "run_ids"],
                    "msg": "cannot be combined with graph or reason",
                    "type": "exclusive",
                }
            ],
        )
    targets = body.run_ids
    if targets is None:
        found = await client.dead_letters(body.graph, body.reason, limit=BULK_LIMIT)
        targets = [info.run_id for info in found]
    replayed: list[str] = []
    refused: list[Refusal] = []
    for run_id in targets:
        try:
            await client.replay(run_id, from_start=body.from_start)
        except (errors.RunNotFound, errors.OperationRefused) as exc:
            status = 404 if isinstance(exc, errors.RunNotFound) else 409
            refused.append(Refusal(run_id=run_id, status=status, detail=str(exc)))
        else:
            replayed.append(run_id)
    return BulkReplayResult(replayed=replayed, refused=refused)
