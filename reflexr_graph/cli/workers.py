"""``reflexr-graph workers``: the live workers, what each serves and runs now, and its clock's skew."""

from __future__ import annotations

import typer
from rich.table import Table

from reflexr_graph import clock
from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, app, client_of
from reflexr_graph.cli.history import duration
from reflexr_graph.model import WorkerStatus


def skew_text(skew_ms: int | None) -> str:
    """A worker's clock skew against Redis's, e.g. ``+120.0s``; yellow past the warning's bound."""
    if skew_ms is None:
        return "-"
    shown = f"{skew_ms / 1000:+.1f}s" if abs(skew_ms) >= 100 else f"{skew_ms:+d}ms"
    return f"[yellow]{shown}[/]" if abs(skew_ms) > clock.SKEW_WARN_MS else shown


def worker_cells(worker: WorkerStatus, at: float) -> list[str]:
    """One live worker as ``workers`` and ``top`` list it: name, pool, graphs, in flight, last beat
    and clock skew, every text from a worker escaped for the terminal."""
    info = worker.info
    return [
        render.plain(info.name),
        f"{info.pool or '-'} x{info.concurrency}",
        render.plain(", ".join(info.graphs)),
        str(len(worker.in_flight)),
        f"{duration(max(0.0, at - worker.last_beat_at))} ago",
        skew_text(info.clock_skew_ms),
    ]


def _table(found: list[WorkerStatus]) -> None:
    if not found:
        render.out.print("no live worker: start one (reflexr-graph worker)")
        return
    at = clock.now()
    table = Table(title="workers")
    for column in ("worker", "pool", "graphs", "in flight", "last beat", "clock skew", "version"):
        table.add_column(column, overflow="fold")
    for worker in found:
        table.add_row(*worker_cells(worker, at), render.plain(worker.info.version or "-"))
    render.out.print(table)
    if any(
        w.info.clock_skew_ms is not None and abs(w.info.clock_skew_ms) > clock.SKEW_WARN_MS for w in found
    ):
        render.err.print(
            "a worker's clock is off Redis's: the fleet keeps Redis's time, so nothing is affected; "
            "fix NTP on its host"
        )


@app.command()
def workers(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the live workers: pool, graphs, runs in flight, last heartbeat and clock skew against Redis."""
    found = client_of(ctx).worker_statuses()
    if as_json:
        render.print_json([w.model_dump(mode="json") for w in found])
    else:
        _table(found)
