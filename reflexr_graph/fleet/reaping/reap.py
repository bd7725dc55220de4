"""The job that recovers the runs whose lease lapsed (``found.lapsed``), holder only.

It is what makes recovery take about one lease TTL (G5): each run found becomes due now, or dead
when out of attempts, in its own script (reap.lua, which re-checks the lease). A lease lost to an
outage (reaping/outage.py, so that job runs first) counts an interruption, not an attempt. Each run
recovered counts in the metrics and gets a span standing for its crashed attempt.
"""

from __future__ import annotations

import logging

from reflexr_graph.core import metrics, tracing
from reflexr_graph.errors import RunNotFound
from reflexr_graph.fleet import observe
from reflexr_graph.fleet.reaping.job import Pass
from reflexr_graph.fleet.reaping.outage import Outage
from reflexr_graph.model import Reason, Status
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

_OUTAGE_REASONS = (Reason.STORE_UNAVAILABLE.value, Reason.MAX_INTERRUPTIONS.value)
"""The reasons reap.lua gives a run whose lease lapsed in an outage."""


class Reap:
    """Recovers the runs whose lease lapsed, each as an abandoned attempt or an interruption."""

    holder_only = True

    def __init__(self, store: RedisStore, outage: Outage, lease_ttl_s: float) -> None:
        self.store = store
        self.outage = outage
        self.lease_ttl_ms = int(lease_ttl_s * 1000)

    def run(self, current: Pass) -> None:
        # A run reaped now is due now: the dispatch reads the due set again to send it this pass.
        current.requeued += len(self.reap(current.found.lapsed))

    def reap(self, lapsed: list[str] | None = None) -> list[str]:
        """Recover runs whose lease lapsed (``lapsed``: as the read found them, else read now); each
        becomes due now, or dead when out of attempts."""
        recovered = self.store.reap(
            outage=self.outage.lost_to_outage(), lapsed=lapsed, lease_ttl_ms=self.lease_ttl_ms
        )
        for run_id in recovered:
            if self._count_recovered(run_id):
                log.warning(
                    "run %s: its lease lapsed while Redis was unreachable; an interruption, not a failed "
                    "attempt: re-enqueued now (or dead-lettered past REFLEXR_MAX_INTERRUPTIONS)",
                    run_id,
                )
                continue
            log.warning(
                "run %s: its worker stopped renewing the lease; counted as an abandoned attempt, "
                "re-enqueued now (or dead-lettered if it had no attempts left)",
                run_id,
            )
        return recovered

    def _count_recovered(self, run_id: str) -> bool:
        """Count the recovered run's lost attempt; True if it was lost to an outage (an interruption)."""
        try:
            info = self.store.get(run_id)
        except RunNotFound:
            return False
        interrupted = info.reason in _OUTAGE_REASONS
        observe.recovered(info.graph, interrupted=interrupted)
        # The crashed attempt's own span never ended, so it was never exported: this one stands
        # for it in the run's trace, between the attempt that died and the one that resumes.
        trace_context = self.store.trace_context(run_id)
        attrs: dict[str, str | int] = {
            tracing.ATTR_RUN_ID: run_id,
            tracing.ATTR_GRAPH: info.graph,
            tracing.ATTR_ATTEMPT: info.attempts,
            metrics.ATTR_OUTCOME: "interrupted" if interrupted else "abandoned",
        }
        parent = tracing.run_trace_parent(trace_context)
        with tracing.TRACER.start_as_current_span(tracing.RECOVER_RUN, context=parent, attributes=attrs):
            if info.status is Status.DEAD:
                observe.run_ended(info.graph, Status.DEAD, info.reason or "abandoned")
        return interrupted
