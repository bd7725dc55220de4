"""``dlq``: list, show, replay and purge dead-lettered runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    TagOpt,
    YesOpt,
    client_of,
    confirm,
    dlq_app,
)
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.inputs import parse_tag_options
from reflexr_graph.cli.report import EXIT_CODES
from reflexr_graph.cli.selection import RunSelection, Selector, selects
from reflexr_graph.client import BULK_LIMIT, Client, Refused

DEAD_RUNS = Selector(which="dead", reason=True)
"""What ``dlq replay`` and ``dlq purge`` act on: the dead runs named, or --all of them."""


@dlq_app.command("list")
def list_(
    ctx: typer.Context,
    graph: GraphOpt = None,
    reason: ReasonOpt = None,
    tag: TagOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List dead-lettered runs, most recently dead first."""
    found = client_of(ctx).dead_letters(graph=graph, reason=reason, tags=parse_tag_options(tag))
    render.runs(found, "dead-lettered runs", as_json, dead=True)


@dlq_app.command()
def show(ctx: typer.Context, run_id: RunArg, full: FullOpt = False, as_json: JsonOpt = False) -> None:
    """Show a dead run: its error, traceback, attempts and the node its checkpoint resumes at."""
    dead = client_of(ctx).dead_letter(run_id)
    ckpt = dead.checkpoint
    if as_json:
        render.print_json({**render.run_json(dead.run), "traceback": dead.traceback, "checkpoint": ckpt})
        return
    resume = "start (no checkpoint)"
    if ckpt is not None:
        resume = f"{ckpt['next_node'] or '-'} (checkpoint #{ckpt['seq']}, {ckpt['size']} bytes)"
    render.run_detail(dead.run, [("resumes at", resume)], full=full, command="dlq show")
    if dead.traceback:
        render.out.rule("traceback of the last failed attempt")
        render.out.print(dead.traceback, markup=False)


def _targets(client: Client, selection: RunSelection) -> list[str]:
    selection.check()
    if selection.run_ids:
        return selection.run_ids
    found = _dead_ids(client, selection)
    if not found:
        raise BadInput(f"--all matched no dead-lettered runs; check {DEAD_RUNS.narrowing} (see `dlq list`)")
    return found


def _dead_ids(client: Client, selection: RunSelection) -> list[str]:
    """The ids of the dead runs --graph, --reason and --tag match, most recently dead first (the first
    1000: Client.dead_letters' limit)."""
    found = client.dead_letters(graph=selection.graph, reason=selection.reason, tags=selection.tags)
    return [info.run_id for info in found]


@contextmanager
def run_progress(label: str, total: int) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr (for two runs or more); yields what to call as each run is done."""
    with Progress(console=render.err, transient=True, disable=total < 2) as progress:
        task = progress.add_task(label, total=total)
        yield lambda _run_id: progress.advance(task)


def report_bulk(label: str, total: int, failures: list[Refused]) -> None:
    """Say how many runs the bulk action did, and why each failure failed, then exit by the worst."""
    render.out.print(f"{label}: {total - len(failures)} of {total} run(s)")
    for failure in failures:
        render.err.print(f"{failure.run_id}: {failure.error}", markup=False)
    if failures:
        # Each exits as it would for a single run (an unknown id is bad input, 2; a run whose status
        # refuses the operation a refused operation, 1), and the bulk by the highest of them.
        raise typer.Exit(max(EXIT_CODES[failure.error.error_kind] for failure in failures))


@dlq_app.command()
@selects(DEAD_RUNS)
def replay(
    ctx: typer.Context,
    selection: RunSelection,
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
        _replay_from(client, selection, from_start, from_seq, yes)
        return
    targets = _targets(client, selection)
    count = (
        f"at least {len(targets)}" if selection.every and len(targets) >= BULK_LIMIT else str(len(targets))
    )
    if from_start:
        # Discarding checkpoints throws away completed work: ask, however few runs it is.
        confirm(f"replay {count} run(s) from the start, discarding their checkpoints?", yes)
    elif selection.every:
        confirm(f"replay {count} dead run(s)?", yes)
    total, refused = 0, list[Refused]()
    while targets:
        with run_progress("replayed", len(targets)) as advance:
            done = client.replay_many(targets, from_start=from_start, progress=advance)
        total += len(targets)
        refused += done.refused
        # A replayed run is dead no more, so the next page of --all is the runs still to do (and
        # an interrupted --all resumes by running it again).
        if not (selection.every and len(targets) >= BULK_LIMIT and done.replayed):
            break
        targets = _dead_ids(client, selection)
    report_bulk("replayed", total, refused)


def _replay_from(client: Client, selection: RunSelection, from_start: bool, from_seq: int, yes: bool) -> None:
    """Back one run out of bad steps: resume it from an earlier checkpoint of its own history."""
    if selection.every or len(selection.run_ids) != 1:
        raise BadInput("--from names a checkpoint of one run: give exactly one RUN, without --all")
    if from_start:
        raise BadInput("--from and --from-start exclude each other: give one of them")
    run_id = selection.run_ids[0]
    later = [c.seq for c in client.checkpoints(run_id) if c.seq > from_seq]
    confirm(
        f"replay run {run_id} from checkpoint #{from_seq}, dropping the {len(later)} checkpoint(s) after it "
        "and the work recorded since?",
        yes,
    )
    client.replay(run_id, from_seq=from_seq)
    render.out.print(f"replayed {run_id} from checkpoint #{from_seq}")


@dlq_app.command()
@selects(DEAD_RUNS)
def purge(ctx: typer.Context, selection: RunSelection, yes: YesOpt = False) -> None:
    """Delete dead (or cancelled) runs for good."""
    client = client_of(ctx)
    targets = _targets(client, selection)
    confirm(f"delete {len(targets)} run(s) and their checkpoints for good?", yes)

    failures: list[Refused] = []
    with run_progress("purged", len(targets)) as advance:
        for run_id in targets:
            try:
                if not client.purge(run_id):
                    missing = errors.RunNotFound(f"no run {run_id}; check the id (see `dlq list`)")
                    failures.append(Refused(run_id, missing))
            except errors.OperationRefused as exc:
                failures.append(Refused(run_id, exc))
            advance(run_id)
    report_bulk("purged", len(targets), failures)
