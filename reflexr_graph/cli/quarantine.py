"""``dlq messages [--purge]``: queue items workers could not run and moved aside.

These are not runs: an item that is not JSON, is not a Celery message, or names a task no
worker has, never became a run record, so ``dlq list`` cannot show it. A worker puts each in the
quarantine list (store/quarantine.py) with the reason and carries on.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.table import Table

from reflexr_graph.cli import render
from reflexr_graph.cli.app import JsonOpt, YesOpt, client_of, confirm, dlq_app
from reflexr_graph.client import Client
from reflexr_graph.model import QuarantinedItem
from reflexr_graph.store.quarantine import MAXLEN

PREVIEW_CHARS = 60


def _preview(item: QuarantinedItem) -> str:
    if item.encoding == "base64":
        return f"({item.size} bytes, not text)"
    shown = item.raw[:PREVIEW_CHARS].encode("unicode_escape").decode("ascii")
    return shown + ("..." if item.size > len(shown) else "")


def _item_json(item: QuarantinedItem) -> dict[str, Any]:
    return {**asdict(item), "time": render.when(item.time_ms / 1000)}


PurgeOpt = Annotated[
    bool, typer.Option("--purge", help="Delete every quarantined item for good (asks first unless --yes).")
]


@dlq_app.command("messages")
def messages(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most N items.")] = 50,
    as_json: JsonOpt = False,
    purge: PurgeOpt = False,
    yes: YesOpt = False,
) -> None:
    """List queue items workers moved aside (not runs: garbage, unknown tasks), newest first."""
    client = client_of(ctx)
    if purge:
        _purge(client, yes)
        return
    found = client.quarantined(limit)
    items, length, counts = found.items, found.length, found.counts
    if as_json:
        render.print_json({"length": length, "counts": counts, "items": [_item_json(i) for i in items]})
        return
    table = Table(title=f"quarantined queue items ({len(items)} of {length} shown, newest first)")
    for column in ("time", "queue", "reason", "size", "detail", "item"):
        table.add_column(column, overflow="fold")
    for item in items:
        table.add_row(
            render.when(item.time_ms / 1000),
            render.plain(item.queue),
            item.reason,
            f"{item.size}{' (cut)' if item.truncated else ''}",
            render.plain(item.detail),
            render.plain(_preview(item)),
        )
    render.out.print(table)
    total = sum(counts.values())
    if total > length:
        render.err.print(f"{total} moved aside in all; the list keeps the newest {MAXLEN}", markup=False)


def _purge(client: Client, yes: bool) -> None:
    length = client.quarantined(0).length
    if length == 0:
        render.out.print("no quarantined queue items: nothing to delete")
        return
    confirm(f"delete the {length} quarantined queue item(s) for good?", yes)
    render.out.print(f"deleted {client.purge_quarantine()} quarantined queue item(s)")
