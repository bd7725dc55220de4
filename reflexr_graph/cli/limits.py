"""``reflexr-graph limits``: each limit key the fleet has used, its configuration and its use now."""

from __future__ import annotations

import typer
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, app, client_of
from reflexr_graph.model import LimitUsage


def _table(found: list[LimitUsage]) -> None:
    if not found:
        render.out.print(
            "no limit used yet: a step with GraphAction(limits={...}) records its key when it first runs"
        )
        return
    table = Table(title="limits")
    for column in ("key", "rate", "burst", "concurrency", "in use", "granted", "denied", "waited"):
        table.add_column(column, overflow="fold")
    for usage in found:
        full = usage.concurrency is not None and usage.in_use >= usage.concurrency
        in_use = f"{usage.in_use}/{usage.concurrency}" if usage.concurrency is not None else "-"
        table.add_row(
            render.plain(usage.key),
            render.plain(usage.rate or "-"),
            str(usage.burst) if usage.rate else "-",
            str(usage.concurrency or "-"),
            f"[yellow]{in_use}[/]" if full else in_use,
            str(usage.granted),
            str(usage.denied),
            f"{usage.waited_s:.1f}s",
        )
    render.out.print(table)


@app.command()
def limits(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List each limit key: its rate and concurrency, the slots in use now, grants, refusals, waits."""
    found = client_of(ctx).limits()
    if as_json:
        render.print_json([u.as_json() for u in found])
    else:
        _table(found)
