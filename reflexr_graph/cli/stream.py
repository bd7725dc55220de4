"""``stream``: what a run's steps emit, printed as it comes, until the run ends."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, RunArg, app, client_of
from reflexr_graph.model import Status, StreamItem

TopicOpt = Annotated[
    str | None, typer.Option("--topic", "-t", metavar="TOPIC", help="Only the items of this topic.")
]


def _text(item: StreamItem, at_line_start: bool) -> str:
    """How an item reads in a terminal: text as it is (a chat's tokens run on), anything else as a
    JSON line, and a restart as a line of its own that says which step runs again."""
    start = "" if at_line_start else "\n"
    if item.restart:
        where = f" [{item.branch}]" if item.branch else ""
        what = f"call {item.call} of step {item.node}" if item.call else f"step {item.node}"
        step = f"{what}{where} runs again (attempt {item.attempt})"
        return f"{start}[{step}: what it emitted above is void]\n"
    if isinstance(item.value, str):
        return item.value
    return f"{start}{json.dumps(item.value)}\n"


@app.command()
def stream(ctx: typer.Context, run_id: RunArg, topic: TopicOpt = None, as_json: JsonOpt = False) -> None:
    """Print what the run's steps emit, live, until the run ends (exit 1 if it ends dead or cancelled).

    Text values run on without newlines between them, as a chat shows them; other values are
    printed as JSON lines. --json prints each item (offset, topic, node, attempt, value, restart)
    as a JSON line.
    """
    client = client_of(ctx)
    at_line_start = True
    for item in client.stream(run_id, topic=topic):
        out = json.dumps(item.model_dump(mode="json")) + "\n" if as_json else _text(item, at_line_start)
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
            at_line_start = out.endswith("\n")
    if not at_line_start:
        sys.stdout.write("\n")
    info = client.get(run_id)
    if info.status in (Status.DEAD, Status.CANCELLED):
        render.err.print(
            f"run {run_id} ended {info.status.value}: {info.error or info.reason or '-'}", markup=False
        )
        raise typer.Exit(1)
