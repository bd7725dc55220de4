"""``watch``: a live view of one run until it ends."""

from __future__ import annotations

import time

import typer
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import RunArg, app, client_of
from reflexr_graph.model import TERMINAL, RunInfo, Status
from reflexr_graph.store.records import RunEvent

REFRESH_MS = 1000
"""Longest sleep on the event stream between redraws (the elapsed time keeps ticking)."""


def _view(info: RunInfo, last: RunEvent | None, started: float) -> Panel:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("status", render.status_text(info.status))
    if info.status is Status.WAITING:
        table.add_row("waiting for", render.plain(render.waiting_text(info)))
    # Checkpoints, not steps: a step at a boundary that is not safe to save leaves no trace.
    table.add_row("checkpoints saved", str(info.checkpoints))
    table.add_row("current node", info.next_node or ("-" if info.status in TERMINAL else "(start)"))
    table.add_row("attempts", f"{info.attempts}/{info.max_attempts}")
    table.add_row("last event", last.type if last else "-")
    if info.reason:
        table.add_row("reason", info.reason)
    table.add_row("watching", f"{time.monotonic() - started:.0f}s")
    return Panel(table, title=f"{info.graph} · {info.run_id}", expand=False)


@app.command()
def watch(ctx: typer.Context, run_id: RunArg) -> None:
    """Follow a run live (checkpoints saved, current node, attempts) until it ends."""
    client = client_of(ctx)
    started = time.monotonic()
    info = client.get(run_id)
    cursor, last = "0-0", None
    with Live(_view(info, last, started), console=render.out, auto_refresh=False) as live:
        while info.status not in TERMINAL:
            found = client.events(run_id, after=cursor, block_ms=REFRESH_MS)
            if found:
                cursor, last = found[-1].id, found[-1]
            info = client.get(run_id)
            live.update(_view(info, last, started), refresh=True)
    if not render.out.is_terminal:
        render.out.line()  # rich ends the last frame with a newline only on a terminal
    if info.status in (Status.DEAD, Status.CANCELLED):
        render.err.print(
            f"run {run_id} ended {info.status.value}: {info.error or info.reason or '-'}", markup=False
        )
        raise typer.Exit(1)
