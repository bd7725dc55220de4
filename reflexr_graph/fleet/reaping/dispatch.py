"""The job that sends the Celery message of every due run (``found.due``), holder only.

Retries, reaped runs, woken parents and runs whose producer died before sending wait in the store's
due set rather than in a Celery countdown, which on Redis is delivered again and again once it
outlives the visibility timeout. This job sends them, holds a run whose graph no live worker serves
(fleet/unserved.py), and keeps each sent entry as a safety net, sent again ever later until a claim
ends it. It runs last of the jobs that make runs due, and reads the due set again when they did.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from reflexr_graph import clock
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.fleet import backlog, unserved
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.store.reads import DueTarget
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

MIN_RESEND_S = 5.0
"""The shortest wait before a sent but unclaimed message is sent again."""
SEND_RETRY_DELAY_MS = 2000
"""A message that could not be sent is tried again this much later."""


class Dispatch:
    """Sends the due runs' messages; a run's entry waits ``resend_base_ms`` then twice as long each
    time, up to ``resend_cap_ms``, before its message is sent again."""

    holder_only = True

    def __init__(self, app: FleetApp, store: RedisStore) -> None:
        self.app = app
        self.store = store
        settings = app.reflexr_settings
        # A sent message that no worker claims within about two lease TTLs is sent again, then
        # twice as late each time: never later than kombu itself would restore it.
        self.resend_base_ms = int(max(2 * settings.lease_ttl_s, MIN_RESEND_S) * 1000)
        self.resend_cap_ms = int(settings.visibility_timeout_s * 1000)

    def run(self, current: Pass) -> None:
        self.send_due(None if current.requeued else current.found.due)

    def send_due(self, due: list[tuple[str, float]] | None = None) -> int:
        """Send the Celery message of every due run whose graph a live worker serves; returns how many.

        A run whose graph no live worker serves is held instead (no message that nobody would
        take), and dead-lettered as ``unknown_graph`` once it has waited out the grace period.
        ``due`` is the due runs as the read found them, else they are read now.
        """
        sent = 0
        if due is None:
            due = self.store.due()
        targets = self.store.dispatch_of([run_id for run_id, _ in due])
        serving = self.store.serving(sorted({t.graph for t in targets.values() if t.graph}))
        postponed = self._postponed(due, targets, serving)
        for run_id, score in due:
            graph, priority, _ = targets[run_id]
            if graph is None:
                # Its record expired or was purged: nothing to run.
                self.store.ack_due(run_id, score)
            elif not serving[graph]:
                unserved.hold(self.app, self.store, run_id, graph)
            elif run_id not in postponed and self._send(run_id, graph, score, priority):
                sent += 1
        return sent

    def _postponed(
        self, due: list[tuple[str, float]], targets: dict[str, DueTarget], serving: Mapping[str, object]
    ) -> set[str]:
        """The due runs whose message was sent and may still wait in its graph's queue, which holds
        messages: their resend waits one base delay more (fleet/backlog.py), and the others are sent.

        A run queued for the reaper to send (a reaped, replayed, upgraded or woken parent run) is due
        the moment it was queued; one queued with its message (an enqueue's, a signal's, or the
        reaper's own send) is due later, as a safety net. A message lost with a crashed worker is
        then sent again within about that delay of its queue draining, and always once its run
        waited unclaimed as long as kombu would hold an unacked message (the visibility timeout).
        """
        since = clock.now_ms() - self.resend_cap_ms
        sent = {}
        for run_id, score in due:
            graph, _, queued_at = targets[run_id]
            if graph and serving.get(graph) and queued_at is not None and since < queued_at < score:
                sent[run_id] = graph
        if not sent:
            return set()
        waiting = backlog.waiting(self.app, set(sent.values()))
        if not waiting:
            return set()
        postponed = {run_id for run_id, graph in sent.items() if waiting[graph] > 0}
        if postponed:
            self.store.postpone_due(postponed, self.resend_base_ms)
            log.debug(
                "%d queued runs' messages may still wait in their queues (%s); sent again once those "
                "drain, or in %.0f s",
                len(postponed),
                ", ".join(f"{g}: {n}" for g, n in sorted(waiting.items()) if n),
                self.resend_base_ms / 1000,
            )
        return postponed

    def _send(self, run_id: str, graph: str, score: float, priority: int | None = None) -> bool:
        try:
            send_run(self.app, run_id, graph, priority=priority)
        except Exception as exc:
            log.warning(
                "run %s: sending its message failed (%s); trying again in %d ms",
                run_id,
                type(exc).__name__,
                SEND_RETRY_DELAY_MS,
            )
            self.store.bump_due(run_id, SEND_RETRY_DELAY_MS)
            return False
        wait_ms = self.store.reschedule_due(
            run_id, score, base_ms=self.resend_base_ms, cap_ms=self.resend_cap_ms
        )
        log.info(
            "run %s: due; sent its message, a worker claims it next (sent again in %.0f s if unclaimed)",
            run_id,
            wait_ms / 1000,
        )
        return True
