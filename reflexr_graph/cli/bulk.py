"""``cancel --all``: cancel every run a filter of status, graph and tags matches, in pages.

The count is shown before the question. Each page is the runs still matching, so an interrupted
bulk cancel is resumed by giving the same command again.
"""

from __future__ import annotations

from reflexr_graph.cli.app import confirm
from reflexr_graph.cli.dlq import report_bulk, run_progress
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.client import BULK_LIMIT, Client, Refused
from reflexr_graph.client.bulk import RunFilter


def _described(wanted: RunFilter) -> str:
    parts = [f"status {wanted.status.value}"] if wanted.status else []
    parts += [f"graph {wanted.graph!r}"] if wanted.graph else []
    parts += [f"tag {k}={v}" for k, v in (wanted.tags or {}).items()]
    return f" ({', '.join(parts)})" if parts else ""


def cancel_all(
    client: Client, run_id: str | None, every: bool, wanted: RunFilter, now: bool, yes: bool
) -> None:
    """Count the matching runs, ask, then cancel them a page (BULK_LIMIT) at a time until none is left."""
    if run_id is not None:
        raise BadInput("give a run id or --all, not both")
    if not every:
        raise BadInput("name the run (RUN) or pass --all (optionally with --status/--graph/--tag)")
    page = client.cancellable(
        status=wanted.status, graph=wanted.graph, tags=wanted.tags, limit=BULK_LIMIT, now=now
    )
    if not page:
        raise BadInput(f"--all matched no cancellable runs{_described(wanted)}; see `runs`")
    count = f"at least {len(page)}" if len(page) >= BULK_LIMIT else str(len(page))
    how = ", interrupting running steps" if now else ""
    confirm(f"cancel {count} run(s){_described(wanted)}{how}?", yes)
    done, refused = 0, list[Refused]()
    while page:
        ids = [info.run_id for info in page]
        with run_progress("cancelled", len(ids)) as advance:
            result = client.cancel_many(ids, now=now, progress=advance)
        done += len(ids)
        refused += result.refused
        if not result.cancelled:
            break  # nothing changed: the next page would be this one again
        page = client.cancellable(
            status=wanted.status, graph=wanted.graph, tags=wanted.tags, limit=BULK_LIMIT, now=now
        )
    report_bulk("cancelled", done, refused)
