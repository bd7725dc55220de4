"""Routes of a run's waits: signals.

``POST /api/runs/{run_id}/signal`` sends a signal the run's graph declares (its JSON Schema is
in the graph's published ``signals``), validated before anything is written. Time travel
(checkpoints and forks) is in ``api/time_travel.py``.

``GET /api/events`` lists the open waits of agents' runs for an external event (pydantic-ai's
``wait_for_external_event``: an approvals inbox), and ``POST /api/events/{token}`` answers one,
with ``{"payload": ...}`` or ``{"error": "..."}``; the answer records who gave it (the API
token's holder).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from reflexr_graph.api.deps import CallerDep, ClientDep
from reflexr_graph.api.problems import problems
from reflexr_graph.api.roles import needed
from reflexr_graph.api.tokens import Caller
from reflexr_graph.model import EventWait, RunInfo

router = APIRouter(prefix="/runs", tags=["runs"])
events_router = APIRouter(prefix="/events", tags=["events"])

SIGNAL_REFUSED = problems(
    {
        404: "No such run",
        409: "The run has finished, or this signal is pending already",
        422: "The graph declares no such signal, or the value does not validate",
    }
)
ANSWER_REFUSED = problems(
    {
        404: "No wait has this token",
        409: "Answered already, timed out, or the run finished",
        422: "Not a token, or not one of payload and error",
    }
)


class SignalRequest(BaseModel):
    name: str = Field(min_length=1, description="A signal the run's graph declares")
    value: Any = Field(description="JSON, validated against the signal's published schema")


class SignalResult(BaseModel):
    """``woke``: the run was waiting for this signal and is queued now; else the value waits in its
    mailbox for the step to ask for it."""

    woke: bool
    run: RunInfo


@router.post("/{run_id}/signal", response_model=SignalResult, responses=SIGNAL_REFUSED)
async def signal(run_id: str, body: SignalRequest, client: ClientDep, caller: CallerDep) -> SignalResult:
    """Send a signal to a run: it wakes the run if it waits for it, else it waits for the run."""
    woke = await client.signal(run_id, body.name, body.value, by=caller.name)
    return SignalResult(woke=woke, run=await client.get(run_id))


class EventAnswer(BaseModel):
    """Exactly one of ``payload`` (any JSON, null too) and ``error`` (why the wait fails)."""

    payload: Any = Field(default=None, description="The answer; for deferred tool calls, DeferredToolResults")
    error: str | None = Field(
        default=None, min_length=1, description="Why: the wait raises ExternalEventError"
    )

    @model_validator(mode="after")
    def _one_of(self) -> EventAnswer:
        if ("payload" in self.model_fields_set) == ("error" in self.model_fields_set):
            raise ValueError('give exactly one of "payload" and "error"')
        return self


class EventAnswered(BaseModel):
    """``woke``: the run waited and is queued now; else it takes the answer when it gets to its wait."""

    woke: bool
    run_id: str


class PendingEvent(EventWait):
    """A wait for an external event; ``answer`` (``payload`` or ``error``, ``by``, ``at`` in ms)
    once it has one."""

    model_config = ConfigDict(frozen=False)

    token: str | None = Field(  # type: ignore[assignment]
        description="What answers the wait; null for a caller whose role may not answer (a viewer)"
    )
    answer: dict[str, Any] | None = None


def answerer(request: Request) -> str:
    """Who answers: the holder of the request's API token (security.require_token sets it)."""
    return str(getattr(request.state, "token_holder", "") or "api")


def shown(wait: dict[str, Any], caller: Caller) -> PendingEvent:
    """A wait as ``caller`` may see it: its token, which is what answers it, only for a role that
    may answer (api/roles.py), so a viewer sees the inbox and cannot act through what it read."""
    event = PendingEvent.model_validate(wait)
    if caller.role < needed("POST", events_router.prefix + "/{token}"):
        event.token = None
    return event


@events_router.get("", response_model=list[PendingEvent])
async def pending_events(
    client: ClientDep, caller: CallerDep, graph: str | None = None
) -> list[PendingEvent]:
    """Every open wait for an external event, oldest first, with the deferred tool calls it answers
    (the token only for a caller that may answer)."""
    waits = await client.pending_events(graph)
    return [shown(w.to_json(), caller) for w in waits]


@events_router.post("/{token}", response_model=EventAnswered, responses=ANSWER_REFUSED)
async def answer_event(token: str, body: EventAnswer, request: Request, client: ClientDep) -> EventAnswered:
    """Answer a wait: its run is queued at once. A wait takes one answer; no error repeats it."""
    by = answerer(request)
    if body.error is not None:
        woke = await client.fail_event(token, body.error, by=by)
    else:
        woke = await client.resolve_event(token, body.payload, by=by)
    return EventAnswered(woke=woke, run_id=token.rpartition("~")[0])


@router.get("/{run_id}/event-waits", response_model=list[PendingEvent])
async def event_waits(run_id: str, client: ClientDep, caller: CallerDep) -> list[PendingEvent]:
    """The run's waits for external events, open or answered (who answered, when, and what); the
    token only for a caller that may answer."""
    await client.get(run_id)  # RunNotFound (404) for an unknown run
    return [shown(w.to_json(), caller) for w in await client.event_waits(run_id)]
