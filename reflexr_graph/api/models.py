"""What the API's routes take and give, as pydantic models (and so in the OpenAPI document)."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, Field, model_validator

from reflexr_graph.api.problems import HTTP_STATUS
from reflexr_graph.client import Refused
from reflexr_graph.model import RunEvent, RunInfo, Status
from reflexr_graph.schemas import GraphSchema


class EnqueueRequest(BaseModel):
    """A run to queue: the graph's name, its inputs and, optionally, its initial state."""

    graph: str = Field(min_length=1)
    inputs: Any = Field(description="JSON inputs, validated against the graph's published schema")
    state: Any = None
    idempotency_key: str | None = Field(
        None, min_length=1, max_length=512, description="Or the Idempotency-Key header"
    )
    priority: int | None = Field(
        None, ge=0, le=9, description="0 (the default, served first) to 9 (served last)"
    )
    tags: dict[str, str] | None = Field(None, description="The run's tags, key to value (at most 16)")


class ReplayRequest(BaseModel):
    from_start: bool = Field(False, description="Discard the checkpoint and run from the first step")
    from_seq: int | None = Field(
        None, ge=0, description="Resume from this earlier checkpoint of the run's history instead"
    )


class BulkReplayRequest(BaseModel):
    """Dead runs to replay: the ``run_ids`` given, or every dead run matching ``graph``, ``reason``
    and ``tags``. Its fields are ``Client.replay_many``'s arguments, which the route passes on."""

    run_ids: list[str] | None = Field(None, max_length=1000)
    graph: str | None = None
    reason: str | None = None
    tags: dict[str, str] | None = None
    from_start: bool = False


class BulkRequest(BaseModel):
    """Runs to act on: the ``run_ids`` given, or those matching ``status``, ``graph`` and ``tags``,
    or with ``"all": true`` every one the action takes. An empty filter is refused: it would act
    on every run, which only ``"all": true`` may mean. Its fields (and a subclass's) are the
    arguments of the client's bulk operation (``cancel_many``, ``purge_many``), which the route
    passes on."""

    run_ids: list[str] | None = Field(None, max_length=1000)
    status: Status | None = None
    graph: str | None = None
    tags: dict[str, str] | None = None
    all: bool = Field(False, description="Act on every run the action takes, with no filter")

    @model_validator(mode="after")
    def _intended(self) -> Self:
        if self.run_ids is None and not self.all and self.status is None and not self.graph and not self.tags:
            raise ValueError(
                "an empty filter would act on every run: give run_ids, a filter (status, graph, tags), "
                'or "all": true to mean every run'
            )
        if self.run_ids is not None and self.all:
            raise ValueError('give run_ids or "all": true, not both')
        return self


class BulkCancelRequest(BulkRequest):
    """Runs to cancel: the ``run_ids`` given, or the cancellable runs matching ``status``, ``graph``
    and ``tags``, or every cancellable run with ``"all": true``."""

    now: bool = Field(False, description="Interrupt running steps with CancelledError")


class Refusal(BaseModel):
    run_id: str
    status: int
    detail: str


class BulkReplayResult(BaseModel):
    replayed: list[str]
    refused: list[Refusal]


class BulkCancelResult(BaseModel):
    cancelled: list[str]
    refused: list[Refusal]


class BulkPurgeRequest(BulkRequest):
    """Runs to delete for good: the ``run_ids`` given, or the finished runs matching ``status``
    (succeeded, dead or cancelled), ``graph`` and ``tags``, or every finished run with ``"all": true``."""


class BulkPurgeResult(BaseModel):
    purged: list[str]
    refused: list[Refusal]


class RunPageOut(BaseModel):
    """One page of runs, newest first; pass ``cursor`` back to get the next (null: no more)."""

    runs: list[RunInfo]
    cursor: str | None


class EventOut(BaseModel):
    """One event of a run's history: its stream id, type, time (epoch s) and fields (no payloads)."""

    id: str
    type: str
    at: float
    fields: dict[str, str]

    @classmethod
    def of(cls, event: RunEvent) -> EventOut:
        return cls(id=event.id, type=event.type, at=event.at, fields=event.fields)


class CheckpointOut(BaseModel):
    seq: int
    saved_at: float
    size: int
    next_node: str | None


class DeadLetterOut(BaseModel):
    """A dead run with what an operator needs to decide: its error, traceback and checkpoint."""

    run: RunInfo
    traceback: str | None
    checkpoint: CheckpointOut | None


class GraphOut(BaseModel):
    """A published graph: its JSON Schemas, Mermaid diagram, and the live workers that serve it."""

    graph: GraphSchema
    workers: list[str]


class Health(BaseModel):
    status: str
    warning: str | None = None
    """How Redis may lose runs (``/readyz``), as the workers' start and ``health --redis`` say it."""


def refusals(refused: list[Refused]) -> list[Refusal]:
    """What a bulk operation could not do, each with the status a single request would have got."""
    return [
        Refusal(
            run_id=r.run_id,
            status=HTTP_STATUS[r.error.error_kind],
            detail=str(r.error),
        )
        for r in refused
    ]
