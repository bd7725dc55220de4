"""``event``: the external event waits of agents' runs (an approvals inbox), and their answers."""

from __future__ import annotations

import getpass
import json
import socket
from typing import Annotated

import typer

from reflexr_graph.cli import render
from reflexr_graph.cli.app import GraphOpt, Group, JsonOpt, app, client_of
from reflexr_graph.cli.inputs import parse_json
from reflexr_graph.model import EventWait

event_app = typer.Typer(
    help="External event waits (an agent's tool asking a person): list, resolve, fail.",
    cls=Group,
    no_args_is_help=True,
)
app.add_typer(event_app, name="event")

TokenArg = Annotated[
    str, typer.Argument(metavar="TOKEN", help="The token the run handed out.", show_default=False)
]


def cli_identity() -> str:
    """Who answers from this CLI: ``cli@<user>@<host>``."""
    return f"cli@{getpass.getuser()}@{socket.gethostname()}"


def _said(woke: bool, what: str, as_json: bool, token: str) -> None:
    run_id = token.rpartition("~")[0]
    if as_json:
        render.print_json({"run_id": run_id, "answer": what, "woke": woke})
    elif woke:
        render.out.print(f"{what}: run {run_id} was waiting for it and is queued now")
    else:
        render.out.print(f"{what}: run {run_id} takes it when it gets to its wait")


@event_app.command("resolve")
def resolve(
    ctx: typer.Context,
    token: TokenArg,
    value: Annotated[
        str,
        typer.Option(
            "--value",
            "-v",
            metavar="JSON|@FILE",
            help="The payload: JSON, @file.json, or @- for stdin. For deferred tool calls, "
            '{"approvals": {"<tool_call_id>": true}}.',
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Answer the wait of TOKEN with a payload, and wake its run.

    Exit 1 when the wait was answered already or timed out, or its run finished; 2 for a token
    that is malformed or unknown. No message repeats the payload.
    """
    payload = parse_json(value, "--value")
    woke = client_of(ctx).resolve_event(token, payload, by=cli_identity())
    _said(woke, "resolved", as_json, token)


@event_app.command("fail")
def fail(
    ctx: typer.Context,
    token: TokenArg,
    reason: Annotated[
        str,
        typer.Option(
            "--reason",
            "-r",
            metavar="TEXT",
            help="Why: the wait raises ExternalEventError with it (a deferred call is denied with it).",
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """End the wait of TOKEN without a payload: the run's wait raises ExternalEventError(REASON).

    Exit codes as for ``event resolve``.
    """
    woke = client_of(ctx).fail_event(token, reason, by=cli_identity())
    _said(woke, "failed", as_json, token)


def _line(wait: EventWait) -> str:
    calls = "; ".join(
        f"{c.get('tool_name')}({json.dumps(c.get('args'), separators=(',', ':'))}) [{c.get('tool_call_id')}]"
        for c in wait.calls
    )
    since = render.short_when(wait.since_ms / 1000)
    head = f"{wait.run_id}  {wait.graph}  {wait.agent}  {wait.name}  since {since}"
    return render.terminal_safe(f"{head}\n  token: {wait.token}" + (f"\n  calls: {calls}" if calls else ""))


@event_app.command("list")
def list_events(ctx: typer.Context, graph: GraphOpt = None, as_json: JsonOpt = False) -> None:
    """Every open wait, oldest first: run, graph, agent, wait name, since when, its token, and for
    deferred tool calls each call's tool and validated arguments."""
    waits = client_of(ctx).pending_events(graph)
    if render.shown_as_json_or_none(waits, as_json, "no run waits for an external event"):
        return
    for wait in waits:
        render.out.print(_line(wait), markup=False, highlight=False)
