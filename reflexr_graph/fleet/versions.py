"""Version-pinned runs (G9): a run finishes on the graph version it started on.

Every worker consumes its graph's queue and its version's (``<queue>.<graph>@<version>``). The
claim refuses a run pinned to another version, or one not started yet when a newer version is
served (``ClaimOutcome.VERSION``): the worker hands the message on to that version's queue when
a live worker serves it, and otherwise holds the run (``hold_version.lua``). A held run is looked
at again for ``REFLEXR_VERSION_GRACE_S``, so a deploy's restart does not flap it, and then waits
(``waiting_for = version:<v>``) holding no worker and no message, until a worker of its version
beats and takes it back (:func:`wake_held`). It resumes from its checkpoint, with its records.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import signals

from reflexr_graph.config.dispatch import forward, send_run, version_queue
from reflexr_graph.fleet import observe
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.outcome import Delivered, Outcome
from reflexr_graph.store.contracts import VersionHold
from reflexr_graph.store.records import Claim
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.upgrades import move_marked

log = logging.getLogger(__name__)

RECHECK_MS = 5000
"""How often a held run looks again for a live worker of its version during the grace period."""
VIEW_TTL_S = 2.0
"""How long a process trusts what it read of the newest served version (one read per graph then)."""
WAKE_BATCH = 100
"""At most this many held runs a worker takes back per beat."""


class NewestView:
    """The newest version of each graph that a live worker serves, as this process last read it.

    Only a worker process reads it (:meth:`enable` at its start): a process that only calls the
    task in place (tests, tools) pins a new run to its own version without asking.
    """

    def __init__(self) -> None:
        self.enabled = False
        self._seen: dict[str, tuple[float, str]] = {}

    def enable(self) -> None:
        self.enabled = True

    def newest(self, store: RedisStore, graph: str) -> str:
        """'' when unknown (disabled, or no version is served)."""
        if not self.enabled:
            return ""
        now = time.monotonic()
        seen = self._seen.get(graph)
        if seen is not None and seen[0] > now:
            return seen[1]
        live = store.live_versions(graph)
        newest = next((v for v, workers in live.items() if workers), "")
        self._seen[graph] = (now + VIEW_TTL_S, newest)
        return newest


VIEW = NewestView()


def route(app: FleetApp, store: RedisStore, claim: Claim, kwargs: dict[str, Any]) -> Delivered:
    """Hand a new run on to the newest version's queue, or hold a pinned run for its version's workers."""
    run_id, graph, version = claim.run_id, claim.graph, claim.version
    if claim.moving:
        return _move(app, store, claim, kwargs)
    if not claim.pinned:
        forward(app, run_id, kwargs, graph, version)
        log.info(
            "run %s starts on the newest version of graph %r, %s; forwarded to queue %s",
            run_id,
            graph,
            version,
            version_queue(app.conf.task_default_queue, graph, version),
        )
        return Delivered(Outcome.FORWARDED, run_id, "version")
    grace_s = app.reflexr_settings.version_grace_s
    held = store.hold_version(
        run_id,
        graph,
        version,
        grace_ms=int(grace_s * 1000),
        recheck_ms=min(RECHECK_MS, max(100, int(grace_s * 1000))),
    )
    if held is VersionHold.BEGAN:
        log.info(
            "run %s runs on version %s of graph %r, not this worker's: a live worker of that version "
            "takes it at its next beat; with none for %gs (REFLEXR_VERSION_GRACE_S) it waits for one",
            run_id,
            version,
            graph,
            grace_s,
        )
    elif held is VersionHold.WAITING:
        observe.held_for_version(graph, version)
        log.warning(
            "run %s waits for a worker of version %s of graph %r (waiting_for version:%s); start one, "
            "or move the run with `reflexr-graph upgrade`",
            run_id,
            version,
            graph,
            version,
        )
    return Delivered(Outcome.HELD, run_id, f"version:{version}")


def _move(app: FleetApp, store: RedisStore, claim: Claim, kwargs: dict[str, Any]) -> Delivered:
    """A run ``upgrade --include-running`` marked, its attempt over: a worker of the version it moves
    to moves it (judging its checkpoint with this worker's graph when the upgrade resumes runs) and
    sends it to that version's queue; any other worker hands its message on there."""
    run_id, graph, version = claim.run_id, claim.graph, claim.version
    action = app.reflexr_registry.get(graph)
    if action is None or action.version != version:
        forward(app, run_id, kwargs, graph, version)
        log.info(
            "run %s moves to version %s of graph %r; forwarded to that version's queue",
            run_id,
            version,
            graph,
        )
        return Delivered(Outcome.FORWARDED, run_id, "version")
    moved = store.do(move_marked(run_id, graph, action))
    if moved is not None:
        send_run(app, run_id, graph, version=version)
        left, move = moved
        how = "resumes from its checkpoint" if move.resumes else "starts over from its first step"
        log.info("run %s: its attempt on version %s ended; it moved to this worker's version %s and %s (%s)",
                 run_id, left, version, how, move.reason)  # fmt: skip
    return Delivered(Outcome.FORWARDED, run_id, "version")


def wake_held(app: FleetApp, store: RedisStore, marked: dict[tuple[str, str], int] | None = None) -> int:
    """Take back the runs held for this worker's versions and send each to its version's queue.

    Only the versions marked as having held runs (``marked``: store ``held_versions``, read once a
    beat) are looked for in the shards; one that none holds any more is struck off, so an idle beat
    reads one key.
    """
    woken = 0
    due_ms = int(app.reflexr_settings.lease_ttl_ms)
    if marked is None:
        marked = store.held_versions()
    for graph, action in sorted(app.reflexr_registry.items()):
        generation = marked.get((graph, action.version))
        if generation is None:
            continue
        run_ids = store.held_for_version(graph, action.version, WAKE_BATCH)
        if not run_ids:
            store.unhold_version(graph, action.version, generation)
        for run_id in run_ids:
            if store.wake_version(run_id, graph, action.version, due_ms=due_ms):
                send_run(app, run_id, graph, version=action.version)
                woken += 1
                log.info(
                    "run %s: a worker of version %s is live; the run is queued again", run_id, action.version
                )
    return woken


def _on_process_init(**_: Any) -> None:
    # A pool child is forked before the main process is ready: it reads the view of its own.
    VIEW.enable()


def install() -> None:
    """Let every worker process (pool children too) read the newest served version."""
    signals.worker_process_init.connect(_on_process_init, weak=False)
