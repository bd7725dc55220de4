"""Routes of time travel: a run's checkpoints listed and shown, and a new run forked from one.

``GET /api/runs/{run_id}/checkpoints`` lists what ``Client.checkpoints`` does, without values;
``GET /api/runs/{run_id}/checkpoints/{seq}`` shows one with its state and inputs, because an
operator asks for them (the only route that returns values besides a run's output);
``POST /api/runs/{run_id}/fork`` creates a new run that resumes from one of them, the state
edited when given, validated against the published state schema before anything is written.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, Field

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.idempotency import IdempotencyHeader, one_key
from reflexr_graph.api.problems import problems
from reflexr_graph.model import CheckpointDetail, CheckpointInfo, RunInfo

router = APIRouter(prefix="/runs", tags=["time travel"])

NOT_KEPT = problems({404: "No such run, or it keeps no such checkpoint (`kept` lists its seqs)"})
FORK_REFUSED = {
    **NOT_KEPT,
    **problems(
        {
            409: "The checkpoint was saved by another version of the graph",
            422: "The edited state or patch does not validate",
        }
    ),
}


class ForkRequest(BaseModel):
    from_seq: int = Field(ge=0, description="The checkpoint of the source run the fork resumes from")
    state: Any = Field(
        None,
        description="JSON that replaces the checkpoint's state, validated first; a field the state "
        "type lacks is refused",
    )
    patch: Any = Field(
        None,
        description="A JSON object merged into the checkpoint's state instead (objects key by key, any "
        "other value replaces), validated as state is",
    )
    priority: int | None = Field(None, ge=0, le=9, description="The fork's priority; the source's by default")
    idempotency_key: str | None = Field(
        None, min_length=1, max_length=512, description="Or the Idempotency-Key header"
    )


@router.get("/{run_id}/checkpoints", response_model=list[CheckpointInfo], responses=NOT_KEPT)
async def checkpoints(run_id: str, client: ClientDep) -> list[CheckpointInfo]:
    """Every checkpoint the run keeps, oldest first, the latest last; no values."""
    return await client.checkpoints(run_id)


@router.get("/{run_id}/checkpoints/{seq}", response_model=CheckpointDetail, responses=NOT_KEPT)
async def checkpoint(run_id: str, seq: Annotated[int, Path(ge=0)], client: ClientDep) -> CheckpointDetail:
    """One checkpoint with its values: the state, the graph inputs and the next task's inputs
    (the output, for the finished one)."""
    return await client.checkpoint(run_id, seq)


@router.post("/{run_id}/fork", status_code=201, response_model=RunInfo, responses=FORK_REFUSED)
async def fork(
    run_id: str,
    body: ForkRequest,
    client: ClientDep,
    response: Response,
    idempotency_key: IdempotencyHeader = None,
) -> RunInfo:
    """Create a new run of the same graph that resumes from checkpoint ``from_seq``; the source
    run does not change. The same idempotency key gives the same fork."""
    new_id = await client.fork(
        run_id,
        from_seq=body.from_seq,
        state=body.state,
        patch=body.patch,
        priority=body.priority,
        idempotency_key=one_key(idempotency_key, body.idempotency_key),
    )
    response.headers["Location"] = f"/api/runs/{new_id}"
    return await client.get(new_id)
