"""``signal``: send a signal to a run, waking it when it waits for that signal."""

from __future__ import annotations

from typing import Annotated

import typer

from reflexr_graph import errors
from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, RunArg, app, client_of
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.inputs import parse_json


@app.command()
def signal(
    ctx: typer.Context,
    run_id: RunArg,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The signal's name.", show_default=False)],
    value: Annotated[
        str | None,
        typer.Option(
            "--value",
            "-v",
            metavar="JSON|@FILE",
            help="The signal's value: JSON, @file.json, or @- for stdin (required unless the signal "
            "takes null).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Send signal NAME to a run, validated against the schema its graph publishes.

    A run waiting for NAME is queued at once; otherwise the value waits in the run's mailbox
    until the step asks for it. Exit 2 for an unknown run or signal name, or a value that
    does not validate (the message names the fields, never the value); 1 for a finished run
    or a signal of that name sent before and not taken yet.
    """
    parsed = None if value is None else parse_json(value, "--value")
    client = client_of(ctx)
    try:
        woke = client.signal(run_id, name, parsed)
    except errors.InvalidInputs:
        if value is not None:
            raise
        # Without --value the signal was sent as null, which its schema refuses.
        raise BadInput(
            f"--value is required: signal {name!r} takes a value (JSON, @file.json or @- for stdin) "
            "that its graph's schema describes"
        ) from None
    if as_json:
        render.print_json({"run_id": run_id, "signal": name, "woke": woke})
    elif woke:
        render.out.print(f"signal {name!r} sent to {run_id}: it was waiting for it and is queued now")
    else:
        render.out.print(
            f"signal {name!r} kept for {run_id}: the run is not waiting for it yet, and takes it when it does"
        )
