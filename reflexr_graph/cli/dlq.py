"""``dlq``: list, show, replay and purge dead-lettered runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.progress import Progress

from reflexr_graph import errors
from reflexr_graph.cli import render
from reflexr_graph.cli.app import (
    FullOpt,
    GraphOpt,
    JsonOpt,
    ReasonOpt,
    RunArg,
    YesOpt,
    client_of,
    confirm,
    dlq_app,
)
from reflexr_graph.cli.failures import EXIT_FAILED, EXIT_USAGE, BadInput
from reflexr_graph.client import Client

# metavar is the bare name: the usage line adds the brackets and dots (`[RUN]...`) itself.
RunsArg = Annotated[list[str] | None, typer.Argument(metavar="RUN", help="Run ids.", show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="Every dead run (narrowed by --graph/--reason).")]


@dlq_app.command("list")
def list_(
    ctx: typer.Context, graph: GraphOpt = None, reason: ReasonOpt = None, as_json: JsonOpt = False
) -> None:
    """List dead-lettered runs, most recently dead first."""
    found = client_of(ctx).dead_letters(graph=graph, reason=reason)
    render.runs(found, "dead-lettered runs", as_json, dead=True)


@dlq_app.command()
def show(ctx: typer.Context, run_id: RunArg, full: FullOpt = False, as_json: JsonOpt = False) -> None:
    """Show a dead run: its error, traceback, attempts and the node its checkpoint resumes at."""
    client = client_of(ctx)
    info = client.get(run_id)
    tb = client.traceback(run_id)
    ckpt = client.checkpoint_info(run_id)
    if as_json:
        render.print_json({**render.run_json(info), "traceback": tb, "checkpoint": ckpt})
        return
    resume = "start (no checkpoint)"
    if ckpt is not None:
        resume = f"{ckpt['next_node'] or '-'} (checkpoint #{ckpt['seq']}, {ckpt['size']} bytes)"
    render.run_detail(info, [("resumes at", resume)], full=full, command="dlq show")
    if tb:
        render.out.rule("traceback of the last failed attempt")
        render.out.print(tb, markup=False)


def _targets(
    client: Client, run_ids: list[str], every: bool, graph: str | None, reason: str | None
) -> list[str]:
    if run_ids and every:
        raise BadInput("give run ids or --all, not both")
    if not run_ids and not every:
        raise BadInput("name the runs (RUN...) or pass --all (optionally with --graph/--reason)")
    if run_ids:
        if graph or reason:
            raise BadInput("--graph and --reason only narrow --all; drop them or use --all")
        return run_ids
    found = [info.run_id for info in client.dead_letters(graph=graph, reason=reason)]
    if not found:
        raise BadInput("--all matched no dead-lettered runs; check --graph/--reason (see `dlq list`)")
    return found


def _bulk(label: str, run_ids: list[str], act: Callable[[str], None]) -> None:
    """Apply ``act`` to each run with a progress bar; report failures at the end."""
    failures: list[tuple[str, errors.ReflexrError]] = []
    with Progress(console=render.err, transient=True, disable=len(run_ids) < 2) as progress:
        task = progress.add_task(label, total=len(run_ids))
        for run_id in run_ids:
            try:
                act(run_id)
            except (errors.RunNotFound, errors.OperationRefused) as exc:
                failures.append((run_id, exc))
            progress.advance(task)
    done = len(run_ids) - len(failures)
    render.out.print(f"{label}: {done} of {len(run_ids)} run(s)")
    for run_id, problem in failures:
        render.err.print(f"{run_id}: {problem}", markup=False)
    if failures:
        # An unknown id is bad input (2); a run whose status refuses the operation is a refused
        # operation (1), as for a single run.
        unknown = any(isinstance(problem, errors.RunNotFound) for _, problem in failures)
        raise typer.Exit(EXIT_USAGE if unknown else EXIT_FAILED)


@dlq_app.command()
def replay(
    ctx: typer.Context,
    run_ids: RunsArg = None,
    every: AllOpt = False,
    graph: GraphOpt = None,
    reason: ReasonOpt = None,
    from_start: Annotated[
        bool, typer.Option("--from-start", help="Discard the checkpoint and run from the first step.")
    ] = False,
    from_seq: Annotated[
        int | None,
        typer.Option(
            "--from",
            min=0,
            metavar="SEQ",
            help="Resume one run from checkpoint SEQ of its history (see `checkpoints`), "
            "dropping the checkpoints after it.",
        ),
    ] = None,
    yes: YesOpt = False,
) -> None:
    """Queue dead (or cancelled) runs again; they resume from their last checkpoint."""
    client = client_of(ctx)
    if from_seq is not None:
        _replay_from(client, run_ids or [], every, from_start, from_seq, yes)
        return
    targets = _targets(client, run_ids or [], every, graph, reason)
    if from_start:
        # Discarding checkpoints throws away completed work: ask, however few runs it is.
        confirm(f"replay {len(targets)} run(s) from the start, discarding their checkpoints?", yes)
    elif every:
        confirm(f"replay {len(targets)} dead run(s)?", yes)

    def act(run_id: str) -> None:
        client.replay(run_id, from_start=from_start)

    _bulk("replayed", targets, act)


def _replay_from(
    client: Client, run_ids: list[str], every: bool, from_start: bool, from_seq: int, yes: bool
) -> None:
    """Back one run out of bad steps: resume it from an earlier checkpoint of its own history."""
    if every or len(run_ids) != 1:
        raise BadInput("--from names a checkpoint of one run: give exactly one RUN, without --all")
    if from_start:
        raise BadInput("--from and --from-start exclude each other: give one of them")
    run_id = run_ids[0]
    later = [c.seq for c in client.checkpoints(run_id) if c.seq > from_seq]
    confirm(
        f"replay run {run_id} from checkpoint #{from_seq}, dropping the {len(later)} checkpoint(s) after it "
        "and the work recorded since?",
        yes,
    )
    client.replay(run_id, from_seq=from_seq)
    render.out.print(f"replayed {run_id} from checkpoint #{from_seq}")


@dlq_app.command()
def purge(
    ctx: typer.Context,
    run_ids: RunsArg = None,
    every: AllOpt = False,
    graph: GraphOpt = None,
    reason: ReasonOpt = None,
    yes: YesOpt = False,
) -> None:
    """Delete dead (or cancelled) runs for good."""
    client = client_of(ctx)
    targets = _targets(client, run_ids or [], every, graph, reason)
    confirm(f"delete {len(targets)} run(s) and their checkpoints for good?", yes)

    def act(run_id: str) -> None:
        if not client.purge(run_id):
            raise errors.RunNotFound(f"no run {run_id}; check the id (see `dlq list`)")

    _bulk("purged", targets, act)
