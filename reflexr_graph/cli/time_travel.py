"""Time travel: ``checkpoints`` lists what a run keeps, ``checkpoint`` shows one with its values,
``fork`` starts a new run from one (``dlq replay --from`` is in cli/dlq.py).

These are the only commands that print state or input values, because an operator asks for
them; errors and logs still never do.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, RunArg, YesOpt, app, client_of, confirm
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.inputs import parse_json
from reflexr_graph.model import CheckpointDetail, CheckpointInfo, RunInfo

SeqArg = Annotated[
    int, typer.Argument(metavar="SEQ", min=0, help="The checkpoint's seq (see `checkpoints`).")
]


def _attempt(info: CheckpointInfo, run: RunInfo) -> str:
    """The attempt that saved the checkpoint; ``fork`` for the one a fork was created with."""
    if info.attempt:
        return str(info.attempt)
    # 0: no attempt of this run saved it. Either a fork copied it from its source run, or it was
    # saved before checkpoints recorded their attempt.
    return "fork" if run.forked_from and info.seq == run.forked_at_seq else "-"


def _next(info: CheckpointInfo) -> str:
    return "(finished)" if info.finished else (info.next_node or "-")


def _table(run: RunInfo, found: list[CheckpointInfo]) -> None:
    if not found:
        render.out.print(f"no checkpoints for {run.run_id} (none saved yet, or replayed from the start)")
        return
    caption = f"forked from {run.forked_from} at checkpoint #{run.forked_at_seq}" if run.forked_from else None
    table = Table(title=f"checkpoints of {run.run_id}", caption=caption, box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("saved (UTC)", no_wrap=True)
    table.add_column("attempt", justify="right", no_wrap=True)
    table.add_column("next node", overflow="fold")
    table.add_column("size", justify="right", no_wrap=True)
    for info in found:
        table.add_row(
            str(info.seq),
            render.when(info.saved_at),
            _attempt(info, run),
            render.plain(_next(info)),
            render.size(info.size),
        )
    render.out.print(table)


@app.command()
def checkpoints(ctx: typer.Context, run_id: RunArg, as_json: JsonOpt = False) -> None:
    """List the checkpoints a run keeps, oldest first: seq, time, attempt, next node, size."""
    client = client_of(ctx)
    found = client.checkpoints(run_id)
    if as_json:
        render.print_json([info.model_dump(mode="json") for info in found])
    else:
        _table(client.get(run_id), found)


def _json_block(title: str, value: Any) -> None:
    render.out.rule(title)
    render.out.print(json.dumps(value, indent=2, ensure_ascii=False), markup=False)


def _saved_by(found: CheckpointDetail, run: RunInfo) -> str:
    by = _attempt(found, run)
    if by == "fork":
        return f"a fork (copied from run {run.forked_from})"
    return f"attempt {by}" if by != "-" else "an attempt (not recorded)"


def _detail(found: CheckpointDetail, run: RunInfo) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    saved_by = _saved_by(found, run)
    for key, value in (
        ("run", found.run_id),
        ("checkpoint", f"#{found.seq} of graph {found.graph}"),
        ("saved", f"{render.when(found.saved_at)} UTC by {saved_by}"),
        ("next node", _next(found)),
        ("size", render.size(found.size)),
    ):
        table.add_row(key, render.plain(value))
    render.out.print(table)
    if found.finished:
        _json_block("output", found.output)
        return
    _json_block("state", found.state)
    _json_block("graph inputs", found.inputs)
    _json_block(f"inputs of {found.next_node}", found.next_inputs)


@app.command()
def checkpoint(ctx: typer.Context, run_id: RunArg, seq: SeqArg, as_json: JsonOpt = False) -> None:
    """Show one checkpoint with its values: the state, the graph inputs, the next task's inputs."""
    client = client_of(ctx)
    found = client.checkpoint(run_id, seq)
    if as_json:
        render.print_json(found.model_dump(mode="json"))
    else:
        _detail(found, client.get(run_id))


FromOpt = Annotated[
    int,
    typer.Option("--from", min=0, metavar="SEQ", help="The checkpoint to start from (see `checkpoints`)."),
]
StateOpt = Annotated[
    str | None,
    typer.Option(
        "--state", metavar="JSON|@FILE", help="Replace the checkpoint's state (JSON or @file.json)."
    ),
]
PatchOpt = Annotated[
    str | None,
    typer.Option(
        "--patch",
        metavar="JSON|@FILE",
        help="Merge a JSON object into the checkpoint's state instead (objects key by key).",
    ),
]
PriorityOpt = Annotated[
    int | None,
    typer.Option(
        "--priority", min=0, max=9, metavar="N", help="0 (first) to 9 (last); the source's by default."
    ),
]
KeyOpt = Annotated[
    str | None, typer.Option("--idempotency-key", "-k", metavar="KEY", help="Same key, same fork.")
]


def _change(edited: Any, patched: Any) -> str:
    """How the fork's state differs from the checkpoint's, in the question (field names only)."""
    if edited is not None:
        return "with its state replaced"
    if isinstance(patched, dict):
        return f"with its state patched at {', '.join(f'state.{key}' for key in patched) or 'nothing'}"
    return "with its state as saved"


@app.command()
def fork(
    ctx: typer.Context,
    run_id: RunArg,
    from_seq: FromOpt,
    state: StateOpt = None,
    patch: PatchOpt = None,
    priority: PriorityOpt = None,
    idempotency_key: KeyOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Start a new run of the same graph from checkpoint SEQ of RUN; prints the new run's id.

    The source run is not changed. --state or --patch is validated first, against the state
    schema the graph publishes (a field it lacks is refused), before the question. A fork from
    the finished checkpoint ends at once with the same output.
    """
    if state is not None and patch is not None:
        raise BadInput("--state and --patch exclude each other: replace the state, or patch it")
    edited = None if state is None else parse_json(state, "--state")
    patched = None if patch is None else parse_json(patch, "--patch")
    client = client_of(ctx)
    # Validated before the question: a state the fork would refuse is refused now.
    found = client.check_fork(run_id, from_seq=from_seq, state=edited, patch=patched)
    confirm(
        f"fork run {run_id} of graph {found.graph!r} from checkpoint #{from_seq} (next node "
        f"{_next(found)}), {_change(edited, patched)}? A new run starts and runs the steps after it",
        yes,
    )
    new_id = client.fork(
        run_id,
        from_seq=from_seq,
        state=edited,
        patch=patched,
        priority=priority,
        idempotency_key=idempotency_key,
    )
    if as_json:
        render.print_json({"run_id": new_id, "forked_from": run_id, "forked_at_seq": from_seq})
    else:
        print(new_id)
