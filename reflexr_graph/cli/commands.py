"""Verbs on runs: enqueue, status, runs, history, cancel, graphs, worker, demo."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from reflexr_graph.cli import bulk, dlq, render
from reflexr_graph.cli import history as history_view
from reflexr_graph.cli.app import (
    FullOpt,
    GraphOpt,
    JsonOpt,
    RunArg,
    TagOpt,
    YesOpt,
    app,
    client_of,
    confirm,
)
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.inputs import parse_json, parse_tag_options
from reflexr_graph.cli.selection import RunSelection, Selector, selects
from reflexr_graph.model import RunInfo, Status


def finish(info: RunInfo, as_json: bool, *, full: bool = False) -> None:
    """Print a run; a run that ended dead or cancelled makes the command fail (exit 1)."""
    if as_json:
        render.print_json(render.run_json(info))
    else:
        render.run_detail(info, full=full)
    if info.status in (Status.DEAD, Status.CANCELLED):
        raise typer.Exit(1)


WaitOpt = Annotated[bool, typer.Option("--wait", "-w", help="Wait until the run ends.")]
TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", min=0, metavar="S", help="With --wait: give up after S seconds."),
]


class Until(StrEnum):
    ENDED = "ended"
    WAITING = "waiting"


UntilOpt = Annotated[
    Until,
    typer.Option(
        "--until",
        metavar="ended|waiting",
        help="With --wait: until the run ends (default), or until it also waits (for a signal, a timer...).",
    ),
]


@app.command()
def enqueue(
    ctx: typer.Context,
    graph: Annotated[
        str, typer.Argument(metavar="GRAPH", help="Name of a graph a worker published (see `graphs`).")
    ],
    input_: Annotated[
        str,
        typer.Option(
            "--input", "-i", metavar="JSON|@FILE", help="Inputs as JSON, or @file.json (@- reads stdin)."
        ),
    ],
    state: Annotated[
        str | None,
        typer.Option("--state", metavar="JSON|@FILE", help="Initial state as JSON or @file.json."),
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", "-k", metavar="KEY", help="Same key, same run.")
    ] = None,
    priority: Annotated[
        int | None,
        typer.Option(
            "--priority", "-p", min=0, max=9, metavar="N", help="0 (default, served first) to 9 (last)."
        ),
    ] = None,
    tag: TagOpt = None,
    wait: WaitOpt = False,
    timeout: TimeoutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Queue a run of GRAPH; prints its run id (with --wait, the finished run)."""
    inputs = parse_json(input_, "--input")
    initial = None if state is None else parse_json(state, "--state")
    tags = parse_tag_options(tag)
    client = client_of(ctx)
    done = client.enqueue_run(
        graph, inputs, state=initial, idempotency_key=idempotency_key, priority=priority, tags=tags
    )
    run_id = done.run_id
    if not done.created and not as_json:
        # stdout stays the id alone, for scripts; the person learns that nothing new was queued.
        render.err.print(
            f"run {run_id} already existed: idempotency key {idempotency_key!r} names it, so nothing "
            "new was queued",
            markup=False,
        )
    if not wait:
        if as_json:
            render.print_json({"run_id": run_id, "created": done.created})
        else:
            print(run_id)
        return
    if not as_json:
        render.err.print(f"queued {run_id}; waiting for it to end...")
    finish(client.wait(run_id, timeout=timeout), as_json)


@app.command()
def status(
    ctx: typer.Context,
    run_id: RunArg,
    wait: WaitOpt = False,
    timeout: TimeoutOpt = None,
    until: UntilOpt = Until.ENDED,
    full: FullOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show one run (a long output or error is cut short unless --full; --json never cuts).

    With --wait, wait until it ends (with --until waiting, until it waits, as for a person's
    signal, or ends), and for its record to appear first: a run a foreign producer sent has
    none until a worker takes its first delivery.
    """
    client = client_of(ctx)
    if until is not Until.ENDED and not wait:
        raise BadInput("--until says what --wait waits for: give --wait too")
    if wait:
        finish(client.wait(run_id, timeout=timeout, until=until.value), as_json, full=full)
        return
    info = client.get(run_id)
    if as_json:
        render.print_json(render.run_json(info))
    else:
        render.run_detail(info, full=full)


@app.command()
def runs(
    ctx: typer.Context,
    status_: Annotated[
        Status | None, typer.Option("--status", "-s", metavar="STATUS", help="Only runs in this status.")
    ] = None,
    graph: GraphOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, metavar="N", help="At most N runs.")] = 50,
    tag: TagOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs, newest first (with --tag, those carrying every tag given)."""
    tags = parse_tag_options(tag)
    found = client_of(ctx).runs(status=status_, graph=graph, limit=limit, tags=tags)
    render.runs(found, "runs", as_json)


@app.command()
def history(ctx: typer.Context, run_id: RunArg, as_json: JsonOpt = False) -> None:
    """Show a run's events, oldest first, with how long each step took."""
    events = client_of(ctx).history(run_id)
    if as_json:
        render.print_json([render.event_json(e) for e in events])
    else:
        history_view.show(events, run_id)


NowOpt = Annotated[
    bool, typer.Option("--now", help="Interrupt a running step at once (CancelledError), not at a boundary.")
]


CANCELLABLE_RUNS = Selector(
    which="cancellable",
    status_help="With --all: only runs in this status.",
    one_run=True,
    ids="a run id",
    name_them="the run (RUN) to cancel",
)
"""What ``cancel`` acts on: the run named, or --all the cancellable runs."""


@app.command()
@selects(CANCELLABLE_RUNS)
def cancel(ctx: typer.Context, selection: RunSelection, yes: YesOpt = False, now: NowOpt = False) -> None:
    """Cancel a queued, running, retrying or waiting run, or with --all every one the filter matches.

    A running run finishes the step in flight and stops at its next boundary; --now interrupts
    the step at once (CancelledError). --all shows how many runs match before asking.
    """
    client = client_of(ctx)
    selection.check()
    if selection.every:
        bulk.cancel_all(client, selection.run_filter(), now, yes)
        return
    [run_id] = selection.run_ids
    info = client.get(run_id)
    how = " now, interrupting its step" if now and info.status is Status.RUNNING else ""
    confirm(f"cancel run {run_id} of graph {info.graph!r} ({info.status.value}){how}?", yes)
    after = client.cancel(run_id, now=now)
    if after.cancel_requested:
        render.out.print(
            f"cancel requested for {run_id}: its step in flight finishes, then it stops at the next "
            f"boundary (`status {run_id} --wait` follows it; `cancel --now` interrupts the step)"
        )
    else:
        render.out.print(f"cancelled {run_id}")


FINISHED_RUNS = Selector(
    which="finished",
    status_help="With --all: succeeded, dead or cancelled.",
    ids="a run id",
    name_them="the run (RUN) to purge",
)
"""What ``purge`` acts on: the runs named, or --all the finished runs."""


@app.command()
@selects(FINISHED_RUNS)
def purge(ctx: typer.Context, selection: RunSelection, yes: YesOpt = False) -> None:
    """Delete finished runs (succeeded, dead or cancelled) for good, with their checkpoints.

    --all shows how many runs match before asking, then goes 1,000 at a time; given again, an
    interrupted purge goes on with the runs left. A run that has not finished is refused: cancel it
    first.
    """
    client = client_of(ctx)
    selection.check()
    if selection.every:
        bulk.purge_all(client, selection.run_filter(), yes)
        return
    run_ids = selection.run_ids
    confirm(f"delete {len(run_ids)} run(s) and their checkpoints for good?", yes)
    with dlq.run_progress("purged", len(run_ids)) as advance:
        result = client.purge_many(run_ids, progress=advance)
    dlq.report_bulk("purged", len(run_ids), result.refused)


@app.command()
def graphs(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the published graphs, their input schemas and the live workers that serve each."""
    client = client_of(ctx)
    found = client.graphs()
    serving = client.serving([g.name for g in found])
    if as_json:
        render.print_json([{**g.model_dump(mode="json"), "workers": serving.get(g.name, [])} for g in found])
    else:
        render.graph_table(found, serving)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def worker(ctx: typer.Context) -> None:
    """Start a worker; extra arguments go to `celery worker` (e.g. -c 4 -l info)."""
    # Imported here: the worker remaps SIGTERM before Celery's pool is imported.
    from reflexr_graph.fleet.worker import run_worker

    argv = list(ctx.args)
    state = ctx.find_root().obj
    redis_url = getattr(state, "redis_url", None)
    if redis_url:
        os.environ["REFLEXR_REDIS_URL"] = redis_url  # the worker reads its settings from the env
    code = run_worker(argv)
    raise typer.Exit(int(code or 0))


@app.command()
def demo(
    ctx: typer.Context,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="Leave the demo's private Redis running afterwards (the workers still stop) "
            "and print how to look at its runs and how to stop it.",
        ),
    ] = False,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Afterwards, serve the web console on the demo's runs (workers still running) and "
            "print its URL; stay up until Ctrl-C.",
        ),
    ] = False,
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, metavar="PORT", help="With --serve.")
    ] = 8080,
) -> None:
    """Run the showcase `make run` runs: a crash, a dead letter and a replay on a real fleet."""
    from reflexr_graph.demo import run_demo

    state = ctx.find_root().obj
    redis_url = getattr(state, "redis_url", None)
    if redis_url:
        os.environ["REFLEXR_REDIS_URL"] = redis_url  # the demo uses that Redis instead of a private one
    raise typer.Exit(run_demo(keep=keep, serve_port=port if serve else None))
