"""Operations on runs chosen by a filter of status, graph and tags (``cancel --all``).

A bulk operation lists the runs that match, then changes each with its own script, which
re-checks it. A run it changed no longer matches (a cancelled run is not cancellable), so a bulk
operation that was interrupted is resumed by running it again with the same filter: it finds
only the runs still to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from reflexr_graph import errors
from reflexr_graph.client.core import BULK_LIMIT, Refused
from reflexr_graph.core.tags import check_tags, matches
from reflexr_graph.model import CANCELLABLE, RunInfo, Status
from reflexr_graph.store import keys
from reflexr_graph.store.interventions import cancel_run
from reflexr_graph.store.ops import Op
from reflexr_graph.store.reads import listing


@dataclass(frozen=True)
class BulkCancel:
    """What a bulk cancel did: the runs cancelled (or asked to stop, when running) and those refused."""

    cancelled: list[str]
    refused: list[Refused]


@dataclass(frozen=True)
class RunFilter:
    """Which runs a bulk operation takes: of ``status`` (any it allows when None), of ``graph``,
    carrying every tag of ``tags``."""

    status: Status | None = None
    graph: str | None = None
    tags: Mapping[str, str] | None = None


def _cancellable(wanted: RunFilter) -> frozenset[Status]:
    if wanted.status is None:
        return CANCELLABLE
    status = Status(wanted.status)
    if status not in CANCELLABLE:
        raise errors.InvalidInputs(
            "only queued, running, retrying or waiting runs can be cancelled; pick one of those statuses",
            [{"loc": ["status"], "msg": "is not a cancellable status", "type": "status"}],
        )
    return frozenset({status})


def cancellable_runs(wanted: RunFilter, limit: int, now: bool = False) -> Op[list[RunInfo]]:
    """Up to ``limit`` runs that ``wanted`` matches and a cancel would change, read only from the
    indexes that hold them: the first tag's index, else those of the statuses asked for
    (keys.status_index), never the index of every run. A running run already asked to stop is
    left out unless ``now`` (a cancel would not change it)."""
    statuses = _cancellable(wanted)
    tags = check_tags(wanted.tags)

    def keep(info: RunInfo) -> bool:
        return (
            info.status in statuses
            and (now or not info.cancel_requested)
            and (wanted.graph is None or info.graph == wanted.graph)
            and (not tags or matches(info.tags, tags))
        )

    indexes: list[Callable[[int], str]]
    if tags:
        indexes = [partial(keys.tag_index, *next(iter(tags.items())))]
    else:
        # Queued and retrying runs share one index (the due set): each index is listed once.
        first: dict[str, Status] = {}
        for status in statuses:
            first.setdefault(keys.status_index(status, 0), status)
        indexes = [partial(keys.status_index, status) for status in first.values()]
    found: dict[str, RunInfo] = {}
    for index in indexes:
        page = yield from listing(index, limit - len(found), keep, scan=None)
        # A waiting run with a timer is both due and waiting: it is listed once.
        found.update((info.run_id, info) for info in page.runs)
        if len(found) >= limit:
            break
    return list(found.values())


def cancel_many(
    run_ids: Sequence[str] | None,
    wanted: RunFilter,
    run_retention_s: int,
    now: bool,
    progress: Callable[[str], None] | None = None,
) -> Op[BulkCancel]:
    """Cancel each of ``run_ids`` as ``cancel`` does (``now`` too), or, without them, the runs
    ``wanted`` matches (at most BULK_LIMIT: call again for more, it finds only those left). A run
    that cannot be cancelled is listed with why, and the others go on. ``progress`` is told each
    run id once it is done."""
    if run_ids is not None and wanted != RunFilter():
        raise errors.InvalidInputs(
            "give run ids or a filter (status, graph, tags), not both",
            [{"loc": ["run_ids"], "msg": "cannot be combined with a filter", "type": "exclusive"}],
        )
    if run_ids is None:
        run_ids = [info.run_id for info in (yield from cancellable_runs(wanted, BULK_LIMIT, now))]
    cancelled: list[str] = []
    refused: list[Refused] = []
    for run_id in run_ids:
        try:
            yield from cancel_run(run_id, run_retention_s, now)
        except (errors.RunNotFound, errors.OperationRefused) as exc:
            refused.append(Refused(run_id, exc))
        else:
            cancelled.append(run_id)
        if progress is not None:
            progress(run_id)
    return BulkCancel(cancelled, refused)
