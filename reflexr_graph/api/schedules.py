"""``/api/schedules``: add, list, read, pause, resume, trigger and delete schedules."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.api.problems import problems
from reflexr_graph.core.schedules import Catchup, Overlap
from reflexr_graph.model import ScheduleInfo

router = APIRouter(prefix="/schedules", tags=["schedules"])

NOT_FOUND = problems({404: "No such schedule"})
ADD_REFUSED = problems(
    {
        404: "No such graph is published",
        409: "A schedule of this name exists",
        422: "The clock, inputs or policies do not validate",
    }
)


class ScheduleRequest(BaseModel):
    """A schedule to add: exactly one of ``cron`` (five fields, UTC) and ``every`` (``30s``, ``5m``...)."""

    name: str = Field(min_length=1, max_length=64)
    graph: str = Field(min_length=1)
    cron: str | None = None
    every: str | None = None
    inputs: Any = Field(None, description="Each run's inputs, validated against the graph's published schema")
    overlap: Overlap = Overlap.ALLOW
    catchup: Catchup = Catchup.LATEST


class Triggered(BaseModel):
    run_id: str


@router.post("", status_code=201, response_model=ScheduleInfo, responses=ADD_REFUSED)
async def add(body: ScheduleRequest, client: ClientDep, response: Response) -> ScheduleInfo:
    """Add a schedule; each fire is one run tagged ``schedule=<name>``."""
    info = await client.add_schedule(
        body.name, body.graph, cron=body.cron, every=body.every, inputs=body.inputs,
        overlap=body.overlap, catchup=body.catchup,
    )  # fmt: skip
    response.headers["Location"] = f"/api/schedules/{body.name}"
    return info


@router.get("", response_model=list[ScheduleInfo])
async def list_schedules(client: ClientDep) -> list[ScheduleInfo]:
    """Every schedule, by name, with its next fire time (null while paused) and last fire."""
    return await client.schedules()


@router.get("/{name}", response_model=ScheduleInfo, responses=NOT_FOUND)
async def get_schedule(name: str, client: ClientDep) -> ScheduleInfo:
    """One schedule."""
    return await client.schedule(name)


@router.post("/{name}/pause", response_model=ScheduleInfo, responses=NOT_FOUND)
async def pause(name: str, client: ClientDep) -> ScheduleInfo:
    """Stop the schedule firing until it is resumed."""
    return await client.pause_schedule(name)


@router.post("/{name}/resume", response_model=ScheduleInfo, responses=NOT_FOUND)
async def resume(name: str, client: ClientDep) -> ScheduleInfo:
    """Resume the schedule from its next fire time after now."""
    return await client.resume_schedule(name)


@router.post("/{name}/trigger", response_model=Triggered, responses=NOT_FOUND)
async def trigger(name: str, client: ClientDep) -> Triggered:
    """Fire the schedule now, paused or not."""
    return Triggered(run_id=await client.trigger_schedule(name))


@router.delete("/{name}", status_code=204, responses=NOT_FOUND)
async def delete(name: str, client: ClientDep) -> Response:
    """Delete the schedule; the runs it made stay."""
    await client.delete_schedule(name)
    return Response(status_code=204)
