"""``cancel --all`` and ``purge --all``: cancel or delete every run a filter of status, graph
and tags matches, in pages.

The count is shown before the question. Each page is the runs still matching, so an interrupted
bulk operation is resumed by giving the same command again.
"""

from __future__ import annotations

from collections.abc import Callable

from reflexr_graph.cli.app import confirm
from reflexr_graph.cli.dlq import report_bulk, run_progress
from reflexr_graph.cli.failures import BadInput
from reflexr_graph.client import BULK_LIMIT, Client, Refused
from reflexr_graph.client.bulk import RunFilter
from reflexr_graph.model import RunInfo


def _described(wanted: RunFilter) -> str:
    parts = [f"status {wanted.status.value}"] if wanted.status else []
    parts += [f"graph {wanted.graph!r}"] if wanted.graph else []
    parts += [f"tag {k}={v}" for k, v in (wanted.tags or {}).items()]
    return f" ({', '.join(parts)})" if parts else ""


def _in_pages(
    label: str,
    find: Callable[[], list[RunInfo]],
    act: Callable[[list[str], Callable[[str], None]], tuple[list[str], list[Refused]]],
) -> None:
    """Act on the runs ``find`` gives, a page at a time, until it gives none; then report them."""
    done, refused = 0, list[Refused]()
    page = find()
    while page:
        ids = [info.run_id for info in page]
        with run_progress(label, len(ids)) as advance:
            changed, failed = act(ids, advance)
        done += len(ids)
        refused += failed
        if not changed:
            break  # nothing changed: the next page would be this one again
        page = find()
    report_bulk(label, done, refused)


def _count(page: list[RunInfo]) -> str:
    return f"at least {len(page)}" if len(page) >= BULK_LIMIT else str(len(page))


def cancel_all(client: Client, wanted: RunFilter, now: bool, yes: bool) -> None:
    """Count the matching runs, ask, then cancel them a page (BULK_LIMIT) at a time until none is left."""

    def find() -> list[RunInfo]:
        return client.cancellable(
            status=wanted.status, graph=wanted.graph, tags=wanted.tags, limit=BULK_LIMIT, now=now
        )

    def act(ids: list[str], advance: Callable[[str], None]) -> tuple[list[str], list[Refused]]:
        result = client.cancel_many(ids, now=now, progress=advance)
        return result.cancelled, result.refused

    page = find()
    if not page:
        raise BadInput(f"--all matched no cancellable runs{_described(wanted)}; see `runs`")
    how = ", interrupting running steps" if now else ""
    confirm(f"cancel {_count(page)} run(s){_described(wanted)}{how}?", yes)
    _in_pages("cancelled", find, act)


def purge_all(client: Client, wanted: RunFilter, yes: bool) -> None:
    """Count the finished runs that match, ask, then delete them a page at a time until none is left."""

    def find() -> list[RunInfo]:
        return client.purgeable(status=wanted.status, graph=wanted.graph, tags=wanted.tags, limit=BULK_LIMIT)

    def act(ids: list[str], advance: Callable[[str], None]) -> tuple[list[str], list[Refused]]:
        result = client.purge_many(ids, progress=advance)
        return result.purged, result.refused

    page = find()
    if not page:
        raise BadInput(f"--all matched no finished runs{_described(wanted)}; see `runs`")
    confirm(f"delete {_count(page)} finished run(s){_described(wanted)} and their checkpoints for good?", yes)
    _in_pages("purged", find, act)
