"""``reflexr-graph audit``: who purged, cancelled or cleared what, and when (store/audit.py)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, app, client_of
from reflexr_graph.store.audit import MAX_ENTRIES


@app.command()
def audit(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_ENTRIES, help="At most N actions.")
    ] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List the newest destructive actions (purges, cancels, quarantine purges), newest first, with
    who did them; they are kept after the runs they name are gone."""
    found = client_of(ctx).audit(limit)
    if render.shown_as_json_or_none(found, as_json, "no purge, cancel or quarantine purge recorded yet"):
        return
    table = Table(title=f"audit trail (newest {len(found)}, newest first)")
    for column in ("time", "action", "run", "by"):
        table.add_column(column, overflow="fold")
    for entry in found:
        table.add_row(
            render.when(entry.at_ms / 1000),
            entry.action,
            render.plain(entry.run_id or "-"),
            render.plain(entry.by or "(unnamed)"),
        )
    render.out.print(table)
