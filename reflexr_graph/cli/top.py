"""``top``: the fleet live in the terminal: runs by status, queues per graph, workers, dead letters.

It reads what the store holds (store/overview.py), every ``--interval`` seconds, and redraws in
place with rich Live. ``q`` or Ctrl-C ends it. Printed to something that is not a terminal (a
pipe, a file), it shows the overview once and exits.
"""

from __future__ import annotations

import contextlib
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from reflexr_graph import clock
from reflexr_graph.cli import render
from reflexr_graph.cli.app import app, client_of
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.cli.history import clock_time, duration
from reflexr_graph.cli.workers import worker_cells
from reflexr_graph.model import Overview, Status

QUIT_KEYS = frozenset("qQ")


def _runs(now: Overview, before: Overview | None, elapsed: float) -> Table:
    table = Table(title="runs by status", title_justify="left", expand=False)
    table.add_column("status")
    table.add_column("runs", justify="right")
    table.add_column("change /s", justify="right")
    for status in Status:
        count = now.by_status.get(status.value, 0)
        change = (
            ""
            if before is None or elapsed <= 0
            else f"{(count - before.by_status.get(status.value, 0)) / elapsed:+.1f}"
        )
        table.add_row(render.status_text(status), str(count), change)
    return table


def _queues(now: Overview, at: float) -> Table:
    title = "queued runs per graph" + ("" if now.queued_scanned else " (the oldest only)")
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("graph")
    table.add_column("queued", justify="right")
    table.add_column("oldest waits", justify="right")
    for graph, queue in now.queues.items():
        table.add_row(render.plain(graph), str(queue.queued), duration(max(0.0, at - queue.oldest_at)))
    if not now.queues:
        table.add_row("[dim]none queued[/]", "", "")
    return table


def _workers(now: Overview, at: float) -> Table:
    table = Table(title=f"workers ({len(now.workers)} live)", title_justify="left", expand=False)
    right = ("in flight", "last beat", "clock skew")
    for column in ("worker", "pool", "graphs", "in flight", "last beat", "clock skew"):
        table.add_column(column, justify="right" if column in right else "left")
    for worker in now.workers:
        table.add_row(*worker_cells(worker, at))
    if not now.workers:
        table.add_row("[dim]no live worker[/]", "", "", "", "", "")
    return table


def view(now: Overview, before: Overview | None, elapsed: float, *, live: bool) -> Group:
    """One frame: the fleet now, and how each status count changed since the frame before."""
    at = clock.now()
    head = Text.assemble(
        ("reflexr-graph top", "bold"),
        f"  {clock_time(at)} UTC",
        ("  q or Ctrl-C quits" if live else "", "dim"),
    )
    dead = Text.assemble(("dead letters: ", "bold"), str(now.dead_letters))
    return Group(head, _runs(now, before, elapsed), _queues(now, at), _workers(now, at), dead)


@contextlib.contextmanager
def _keys() -> Iterator[bool]:
    """Single key presses from stdin while it is a terminal (yields whether it is)."""
    if not sys.stdin.isatty():
        yield False
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)  # keys arrive one by one, unechoed; Ctrl-C still interrupts
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_within(seconds: float, keys: bool) -> bool:
    """Wait up to ``seconds``; True if ``q`` was pressed meanwhile."""
    if not keys:
        time.sleep(seconds)
        return False
    ready, _, _ = select.select([sys.stdin], [], [], seconds)
    return bool(ready) and sys.stdin.read(1) in QUIT_KEYS


@app.command()
def top(
    ctx: typer.Context,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.")] = 1.0,
) -> None:
    """The fleet live: runs by status (and their change per second), queued runs per graph,
    the live workers and the dead letters. q or Ctrl-C quits; piped, it prints once."""
    if not interval > 0:
        raise BadInput("--interval must be a number of seconds > 0")
    client = client_of(ctx)
    now = client.overview()
    if not render.out.is_terminal:
        render.out.print(view(now, None, 0.0, live=False))
        return
    taken = time.monotonic()
    first = view(now, None, 0.0, live=True)
    with (
        contextlib.suppress(KeyboardInterrupt),
        _keys() as keys,
        Live(first, console=render.out, auto_refresh=False) as live,
    ):
        while not _quit_within(interval, keys):
            before, then = now, taken
            now, taken = client.overview(), time.monotonic()
            live.update(view(now, before, taken - then, live=True), refresh=True)
