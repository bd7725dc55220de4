"""``schedule``: add, list, pause, resume, delete and trigger schedules (runs on a clock)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import Group, JsonOpt, YesOpt, app, client_of, confirm
from reflexr_graph.cli.inputs import parse_json
from reflexr_graph.core.schedules import Catchup, Overlap
from reflexr_graph.model import ScheduleInfo

schedule_app = typer.Typer(
    help="Schedules: runs of a graph on a cron or a period.", cls=Group, no_args_is_help=True
)
app.add_typer(schedule_app, name="schedule")

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="Schedule name.", show_default=False)]


def _json(info: ScheduleInfo) -> dict[str, Any]:
    return info.model_dump(mode="json")


def _clock(info: ScheduleInfo) -> str:
    schedule = info.schedule
    return f"cron {schedule.cron}" if schedule.cron else f"every {schedule.every_s}s"


def _show(info: ScheduleInfo, as_json: bool) -> None:
    if as_json:
        render.print_json(_json(info))
        return
    _table([info])


def _table(found: list[ScheduleInfo]) -> None:
    table = Table(title="schedules", title_justify="left")
    for column in (
        "name",
        "graph",
        "clock",
        "overlap",
        "catchup",
        "next fire (UTC)",
        "last fire",
    ):
        table.add_column(column, overflow="fold")
    render.whole_column(table, "last run", [info.last_run_id or "-" for info in found])
    for info in found:
        s = info.schedule
        next_fire = "paused" if s.paused else render.when(info.next_fire_at or 0)
        table.add_row(s.name, s.graph, _clock(info), s.overlap.value, s.catchup.value, next_fire,
                      render.when(info.last_fire_at or 0), info.last_run_id or "-")  # fmt: skip
    render.out.print(table)


@schedule_app.command("add")
def add(
    ctx: typer.Context,
    name: NameArg,
    graph: Annotated[str, typer.Option("--graph", "-g", metavar="GRAPH", help="The graph each fire runs.")],
    cron: Annotated[
        str | None, typer.Option("--cron", metavar="EXPR", help="Five-field cron expression, UTC.")
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", metavar="DURATION", help="A period: 30s, 5m, 2h or 1d.")
    ] = None,
    input_: Annotated[
        str | None,
        typer.Option("--input", "-i", metavar="JSON|@FILE", help="Each run's inputs (default: null)."),
    ] = None,
    overlap: Annotated[
        Overlap, typer.Option("--overlap", help="skip: no run while the previous one is active.")
    ] = Overlap.ALLOW,
    catchup: Annotated[
        Catchup, typer.Option("--catchup", help="What fires missed while no worker ran become.")
    ] = Catchup.LATEST,
    as_json: JsonOpt = False,
) -> None:
    """Add a schedule: a run of GRAPH at each time of --cron or --every (exactly one)."""
    inputs = None if input_ is None else parse_json(input_, "--input")
    info = client_of(ctx).add_schedule(
        name, graph, cron=cron, every=every, inputs=inputs, overlap=overlap, catchup=catchup
    )
    _show(info, as_json)


@schedule_app.command("list")
def list_(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the schedules with their next and last fire."""
    found = client_of(ctx).schedules()
    if as_json:
        render.print_json([_json(i) for i in found])
    else:
        _table(found)


@schedule_app.command()
def pause(ctx: typer.Context, name: NameArg, as_json: JsonOpt = False) -> None:
    """Stop a schedule firing until it is resumed."""
    _show(client_of(ctx).pause_schedule(name), as_json)


@schedule_app.command()
def resume(ctx: typer.Context, name: NameArg, as_json: JsonOpt = False) -> None:
    """Resume a schedule from its next fire time after now (the pause's fires are not caught up)."""
    _show(client_of(ctx).resume_schedule(name), as_json)


@schedule_app.command()
def delete(ctx: typer.Context, name: NameArg, yes: YesOpt = False) -> None:
    """Delete a schedule (the runs it made stay)."""
    client = client_of(ctx)
    info = client.schedule(name)
    confirm(f"delete schedule {name!r} ({_clock(info)}, graph {info.schedule.graph!r})?", yes)
    client.delete_schedule(name)
    render.out.print(f"deleted schedule {name}")


@schedule_app.command()
def trigger(ctx: typer.Context, name: NameArg, as_json: JsonOpt = False) -> None:
    """Fire a schedule now, paused or not; prints the run's id."""
    run_id = client_of(ctx).trigger_schedule(name)
    if as_json:
        render.print_json({"run_id": run_id})
    else:
        print(run_id)
