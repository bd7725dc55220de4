"""``/api/runs``: enqueue, list, read, follow, cancel and replay runs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from reflexr_graph.api import stream
from reflexr_graph.api.deps import CallerDep, ClientDep, TagQuery
from reflexr_graph.api.idempotency import IdempotencyHeader, one_key
from reflexr_graph.api.models import (
    BulkCancelRequest,
    BulkCancelResult,
    BulkPurgeRequest,
    BulkPurgeResult,
    EnqueueRequest,
    EventOut,
    ReplayRequest,
    RunPageOut,
    refusals,
)
from reflexr_graph.api.problems import Problem, Responses, problems
from reflexr_graph.api.stream_slots import open_stream
from reflexr_graph.core.emit import TOPIC
from reflexr_graph.core.tags import parse_tags
from reflexr_graph.model import BranchLane, RunInfo, Status

router = APIRouter(prefix="/runs", tags=["runs"])

NOT_FOUND = problems({404: "No such run"})
STREAMS_FULL = problems({429: "The server holds as many event streams as it may (Retry-After)"})
REFUSED = {**problems({409: "The run's status does not allow it"}), **NOT_FOUND}
ENQUEUED: Responses = {
    200: {"model": RunInfo, "description": "The idempotency key already named this run"},
    **problems(
        {
            404: "No such graph is published",
            409: "The idempotency key names a run with other inputs",
            422: "The inputs or state do not validate",
        }
    ),
}


@router.post("", status_code=201, response_model=RunInfo, responses=ENQUEUED)
async def enqueue(
    body: EnqueueRequest,
    client: ClientDep,
    response: Response,
    idempotency_key: IdempotencyHeader = None,
) -> RunInfo:
    """Queue a run of a published graph, validated against its schema (201), or return the run an
    idempotency key already names (200). The ``Idempotency-Key`` header is the idempotency key."""
    done = await client.enqueue_run(
        body.graph,
        body.inputs,
        state=body.state,
        idempotency_key=one_key(idempotency_key, body.idempotency_key),
        priority=body.priority,
        tags=body.tags,
    )
    response.status_code = 201 if done.created else 200
    response.headers["Location"] = f"/api/runs/{done.run_id}"
    return await client.get(done.run_id)


@router.get("", response_model=RunPageOut)
async def list_runs(
    client: ClientDep,
    status: Status | None = None,
    graph: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: str | None = None,
    tag: TagQuery = None,
    q: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="A run id prefix, or part of a graph's name"),
    ] = None,
) -> RunPageOut:
    """Runs newest first (by creation time; by update time within a status), a page at a time.
    ``?tag=k=v`` (repeatable) keeps those carrying every tag given. With ``q``, the runs whose id
    starts with it or whose graph's name holds it: a page may then hold fewer than ``limit`` runs
    and still have a ``cursor``."""
    tags = parse_tags(tag)
    page = await client.runs_page(
        status=status, graph=graph, limit=limit, cursor=cursor, tags=tags, matching=q
    )
    return RunPageOut(runs=page.runs, cursor=page.cursor)


@router.post("/cancel", response_model=BulkCancelResult, responses={422: {"model": Problem}})
async def cancel_many(body: BulkCancelRequest, client: ClientDep, caller: CallerDep) -> BulkCancelResult:
    """Cancel the runs named by ``run_ids``, or the cancellable runs matching ``status``, ``graph``
    and/or ``tags``, or with ``"all": true`` every cancellable run (at most 1000 per call: a
    cancelled run no longer matches, so call again until ``cancelled`` is empty). Runs that cannot
    be cancelled are listed with why. ``GET /api/runs`` with the same filter shows what it would
    take."""
    done = await client.cancel_many(**body.model_dump(), by=caller.name)
    return BulkCancelResult(cancelled=done.cancelled, refused=refusals(done.refused))


@router.post("/purge", response_model=BulkPurgeResult, responses={422: {"model": Problem}})
async def purge_many(body: BulkPurgeRequest, client: ClientDep, caller: CallerDep) -> BulkPurgeResult:
    """Delete for good the runs named by ``run_ids``, or the finished runs matching ``status``,
    ``graph`` and/or ``tags``, or with ``"all": true`` every finished run (at most 1000 per call: a
    purged run is gone, so call again until ``purged`` is empty). Runs not finished, or not there,
    are listed with why."""
    done = await client.purge_many(**body.model_dump(), by=caller.name)
    return BulkPurgeResult(purged=done.purged, refused=refusals(done.refused))


@router.get("/{run_id}", response_model=RunInfo, responses=NOT_FOUND)
async def get_run(run_id: str, client: ClientDep) -> RunInfo:
    """One run: status, attempts, timing, output or error."""
    return await client.get(run_id)


@router.get(
    "/{run_id}/events",
    response_model=list[EventOut],
    responses={
        200: {"content": {stream.MEDIA_TYPE: {}}, "description": "With Accept: text/event-stream, live"},
        **NOT_FOUND,
        **STREAMS_FULL,
    },
)
async def events(run_id: str, request: Request, client: ClientDep) -> list[EventOut] | StreamingResponse:
    """The run's history, oldest first; with ``Accept: text/event-stream``, a live stream of its
    events (SSE, resumable with ``Last-Event-ID``) that ends when the run does."""
    history = await client.history(run_id)  # 404 before any stream starts
    if stream.MEDIA_TYPE not in request.headers.get("accept", ""):
        return [EventOut.of(e) for e in history]
    after = stream.last_event_id(request.headers.get("last-event-id"))
    stopping = request.app.state.stopping
    return open_stream(request, lambda streams: stream.run_stream(streams, run_id, after, stopping))


@router.get("/{run_id}/branches", response_model=list[BranchLane], responses=NOT_FOUND)
async def branches(run_id: str, client: ClientDep) -> list[BranchLane]:
    """When each branch step of the run's maps ran, in the order they started: its node, branch
    path, attempt and start and end (epoch s). The console's timeline draws them as lanes."""
    return await client.branches(run_id)


@router.get(
    "/{run_id}/stream",
    response_class=StreamingResponse,
    responses={
        200: {"content": {stream.MEDIA_TYPE: {}}, "description": "The items, live (SSE)"},
        **NOT_FOUND,
        **STREAMS_FULL,
    },
)
async def item_stream(
    run_id: str,
    request: Request,
    client: ClientDep,
    topic: Annotated[
        str | None, Query(pattern=f"^{TOPIC.pattern}$", description="only this topic's items")
    ] = None,
    after: Annotated[int, Query(ge=0, description="start after this offset")] = 0,
) -> StreamingResponse:
    """What the run's steps emit (``reflexr_graph.emit``), live, as SSE: an ``item`` event per item
    (a ``restart`` event for a restart item) with its offset as the id, resumable with
    ``Last-Event-ID``, and an ``end`` event with the finished run once the run has ended."""
    await client.get(run_id)  # 404 before any stream starts
    after = max(after, stream.last_offset(request.headers.get("last-event-id")))
    stopping = request.app.state.stopping
    return open_stream(request, lambda streams: stream.item_stream(streams, run_id, topic, after, stopping))


@router.post("/{run_id}/cancel", response_model=RunInfo, responses=REFUSED)
async def cancel(
    run_id: str,
    client: ClientDep,
    caller: CallerDep,
    now: Annotated[bool, Query(description="interrupt a running step with CancelledError")] = False,
) -> RunInfo:
    """Cancel a queued, running, retrying or waiting run.

    A running run is cooperative: its step in flight finishes, and the run ends ``cancelled`` at
    the next boundary (until then ``running``, with ``cancel_requested``). ``?now=true`` cancels
    it at once, interrupting the step with ``CancelledError``.
    """
    return await client.cancel(run_id, now=now, by=caller.name)


@router.post("/{run_id}/replay", response_model=RunInfo, responses=REFUSED)
async def replay(
    run_id: str, client: ClientDep, caller: CallerDep, body: ReplayRequest | None = None
) -> RunInfo:
    """Queue a dead or cancelled run again with a fresh attempt budget, from its checkpoint
    unless ``from_start``, or from the earlier checkpoint ``from_seq`` of its history (the ones
    after it are dropped)."""
    if body is None:
        return await client.replay(run_id, by=caller.name)
    return await client.replay(run_id, from_start=body.from_start, from_seq=body.from_seq, by=caller.name)
