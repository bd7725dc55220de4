"""Operations on runs chosen by a filter of status, graph and tags (``cancel --all``, ``purge --all``).

A bulk operation lists the runs that match, then changes each with its own script, which
re-checks it. A run it changed no longer matches (a cancelled run is not cancellable, a purged
one is gone), so a bulk operation that was interrupted is resumed by running it again with the
same filter: it finds only the runs still to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from reflexr_graph import errors
from reflexr_graph.client.core import BULK_LIMIT, Refused, one_by_one
from reflexr_graph.core.tags import check_tags, matches
from reflexr_graph.model import CANCELLABLE, TERMINAL, RunInfo, Status
from reflexr_graph.store import keys
from reflexr_graph.store.interventions import cancel_run, purge_run
from reflexr_graph.store.ops import Op
from reflexr_graph.store.reads import listing


@dataclass(frozen=True)
class BulkCancel:
    """What a bulk cancel did: the runs cancelled (or asked to stop, when running) and those refused."""

    cancelled: list[str]
    refused: list[Refused]


@dataclass(frozen=True)
class BulkPurge:
    """What a bulk purge did: the runs deleted for good, and those refused (not finished, gone)."""

    purged: list[str]
    refused: list[Refused]


@dataclass(frozen=True)
class RunFilter:
    """Which runs a bulk operation takes: of ``status`` (any it allows when None), of ``graph``,
    carrying every tag of ``tags``."""

    status: Status | None = None
    graph: str | None = None
    tags: Mapping[str, str] | None = None

    @classmethod
    def of(cls, status: Status | str | None, graph: str | None, tags: Mapping[str, str] | None) -> RunFilter:
        """The filter of a client call, whose ``status`` may be a status's name."""
        return cls(None if status is None else Status(status), graph, tags)


def _statuses(wanted: RunFilter, allowed: frozenset[Status], what: str) -> frozenset[Status]:
    if wanted.status is None:
        return allowed
    status = Status(wanted.status)
    if status not in allowed:
        names = ", ".join(sorted(s.value for s in allowed))
        raise errors.InvalidInputs(
            f"only {names} runs can be {what}; pick one of those statuses",
            [{"loc": ["status"], "msg": f"is not a status that can be {what}", "type": "status"}],
        )
    return frozenset({status})


def matching_runs(
    wanted: RunFilter, statuses: frozenset[Status], limit: int, also: Callable[[RunInfo], bool]
) -> Op[list[RunInfo]]:
    """Up to ``limit`` runs of ``statuses`` that ``wanted`` matches and ``also`` keeps, read only
    from the indexes that hold them: the first tag's index, else those of the statuses
    (keys.status_index), never the index of every run."""
    tags = check_tags(wanted.tags)

    def keep(info: RunInfo) -> bool:
        return (
            info.status in statuses
            and also(info)
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


def cancellable_runs(wanted: RunFilter, limit: int, now: bool = False) -> Op[list[RunInfo]]:
    """Up to ``limit`` runs that ``wanted`` matches and a cancel would change (:func:`matching_runs`).
    A running run already asked to stop is left out unless ``now`` (a cancel would not change it)."""
    statuses = _statuses(wanted, CANCELLABLE, "cancelled")
    return (yield from matching_runs(wanted, statuses, limit, lambda info: now or not info.cancel_requested))


def purgeable_runs(wanted: RunFilter, limit: int) -> Op[list[RunInfo]]:
    """Up to ``limit`` finished runs (succeeded, dead or cancelled) that ``wanted`` matches."""
    statuses = _statuses(wanted, TERMINAL, "purged")
    return (yield from matching_runs(wanted, statuses, limit, lambda _info: True))


@dataclass(frozen=True)
class Chosen:
    """The runs a bulk operation takes: ``run_ids``, or without them those ``wanted`` matches, which
    must not be empty unless ``every``."""

    run_ids: Sequence[str] | None
    wanted: RunFilter
    every: bool = False

    def ids(self, verb: str, find: Callable[[RunFilter], Op[list[RunInfo]]]) -> Op[Sequence[str]]:
        """``run_ids``, or the ids of the runs ``find`` gives for ``wanted``; InvalidInputs unless
        the runs are named one way: by id, by a filter, or all (``every``)."""
        if self.run_ids is not None and (self.wanted != RunFilter() or self.every):
            raise errors.InvalidInputs(
                "give run ids or a filter (status, graph, tags) or all=True, not both",
                [{"loc": ["run_ids"], "msg": "cannot be combined with a filter", "type": "exclusive"}],
            )
        if self.run_ids is None and self.wanted == RunFilter() and not self.every:
            raise errors.InvalidInputs(
                f"an empty filter would {verb} every run: give run ids, a filter (status, graph, tags), "
                "or all=True to mean every run",
                [{"loc": ["all"], "msg": "is needed to act with no filter", "type": "intent"}],
            )
        if self.run_ids is not None:
            return self.run_ids
        return [info.run_id for info in (yield from find(self.wanted))]


def cancel_many(
    chosen: Chosen,
    run_retention_s: int,
    now: bool,
    progress: Callable[[str], None] | None = None,
    by: str = "",
) -> Op[BulkCancel]:
    """Cancel each run ``chosen`` names as ``cancel`` does (``now`` too); of those its filter
    matches, at most BULK_LIMIT (call again for more, it finds only those left). A run that cannot
    be cancelled is listed with why, and the others go on. ``progress`` is told each run id once
    it is done."""
    run_ids = yield from chosen.ids("cancel", lambda wanted: cancellable_runs(wanted, BULK_LIMIT, now))

    def cancel(run_id: str) -> Op[object]:
        return (yield from cancel_run(run_id, run_retention_s, now, by))

    return BulkCancel(*(yield from one_by_one(run_ids, cancel, progress)))


def purge_many(chosen: Chosen, progress: Callable[[str], None] | None = None, by: str = "") -> Op[BulkPurge]:
    """Delete each run ``chosen`` names for good, as ``purge`` does: of the finished runs its filter
    matches, at most BULK_LIMIT (call again for more; a purged run is gone, so it finds only those
    left). A run that is not finished or not there is listed with why, and the others go on.
    ``progress`` is told each run id once it is done."""
    run_ids = yield from chosen.ids("purge", lambda wanted: purgeable_runs(wanted, BULK_LIMIT))

    def purge(run_id: str) -> Op[object]:
        if not (yield from purge_run(run_id, by)):
            raise errors.RunNotFound(f"no run {run_id}; check the id (see `runs`)")
        return None

    return BulkPurge(*(yield from one_by_one(run_ids, purge, progress)))
