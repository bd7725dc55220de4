"""Routes of a run's waits: signals.

``POST /api/runs/{run_id}/signal`` sends a signal the run's graph declares (its JSON Schema is
in the graph's published ``signals``), validated before anything is written. Time travel
(checkpoints and forks) is in ``api/time_travel.py``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from reflexr_graph.api.deps import CallerDep, ClientDep
from reflexr_graph.api.problems import Problem
from reflexr_graph.model import RunInfo

router = APIRouter(prefix="/runs", tags=["runs"])


class SignalRequest(BaseModel):
    name: str = Field(min_length=1, description="A signal the run's graph declares")
    value: Any = Field(description="JSON, validated against the signal's published schema")


class SignalResult(BaseModel):
    """``woke``: the run was waiting for this signal and is queued now; else the value waits in its
    mailbox for the step to ask for it."""

    woke: bool
    run: RunInfo


@router.post(
    "/{run_id}/signal",
    response_model=SignalResult,
    responses={
        404: {"model": Problem, "description": "No such run"},
        409: {"model": Problem, "description": "The run has finished, or this signal is pending already"},
        422: {
            "model": Problem,
            "description": "The graph declares no such signal, or the value does not validate",
        },
    },
)
async def signal(run_id: str, body: SignalRequest, client: ClientDep, caller: CallerDep) -> SignalResult:
    """Send a signal to a run: it wakes the run if it waits for it, else it waits for the run."""
    woke = await client.signal(run_id, body.name, body.value, by=caller.name)
    return SignalResult(woke=woke, run=await client.get(run_id))
