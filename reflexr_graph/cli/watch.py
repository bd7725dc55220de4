"""``watch``: a live view of one run until it ends."""

from __future__ import annotations

import time

import typer
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from reflexr_graph.cli import history as history_view
from reflexr_graph.cli import render
from reflexr_graph.cli.app import RunArg, app, client_of
from reflexr_graph.client import Client
from reflexr_graph.model import TERMINAL, RunEvent, RunInfo, Status

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


def _summary(info: RunInfo) -> str:
    node = info.next_node or ("-" if info.status in TERMINAL else "(start)")
    return (
        f"status {info.status.value} · checkpoints saved {info.checkpoints} · node {node}"
        f" · attempts {info.attempts}/{info.max_attempts}"
    )


def _live(client: Client, info: RunInfo) -> RunInfo:
    """On a terminal: one panel, redrawn in place."""
    started = time.monotonic()
    cursor, last = "0-0", None
    with Live(_view(info, last, started), console=render.out, auto_refresh=False) as live:
        while info.status not in TERMINAL:
            found = client.events(info.run_id, after=cursor, block_ms=REFRESH_MS)
            if found:
                cursor, last = found[-1].id, found[-1]
            info = client.get(info.run_id)
            live.update(_view(info, last, started), refresh=True)
    return info


def _lines(client: Client, info: RunInfo) -> RunInfo:
    """Off a terminal (a pipe, a file, a CI log): a line per event and per change of the run, each
    written out as it comes (rich flushes every print), so `watch RUN > log` shows the run's
    progress while it runs; a redrawn panel would show only at the end."""
    cursor, shown = "0-0", ""
    while True:
        found = client.events(info.run_id, after=cursor, block_ms=REFRESH_MS)
        for event in found:
            line = f"{history_view.clock_time(event.at)}  {event.type}  {history_view.details(event)}"
            render.out.print(line.rstrip(), markup=False)
        if found:
            cursor = found[-1].id
            info = client.get(info.run_id)
        if _summary(info) != shown:
            shown = _summary(info)
            render.out.print(f"{info.graph} · {info.run_id}: {shown}", markup=False)
        if info.status in TERMINAL:
            return info


@app.command()
def watch(ctx: typer.Context, run_id: RunArg) -> None:
    """Follow a run live (checkpoints saved, current node, attempts) until it ends.

    On a terminal it redraws one panel; piped or redirected, it writes a line per event as it
    comes.
    """
    client = client_of(ctx)
    info = client.get(run_id)
    info = _live(client, info) if render.out.is_terminal else _lines(client, info)
    if info.status in (Status.DEAD, Status.CANCELLED):
        render.err.print(
            f"run {run_id} ended {info.status.value}: {info.error or info.reason or '-'}", markup=False
        )
        raise typer.Exit(1)
