"""What the fleet counts, in one place, so every path that ends an attempt or a run counts alike.

A crashed attempt never ends its span, so it is counted here when the reaper (or the next
claim) finds its lease lapsed: ``reflexr.attempts{reflexr.outcome="abandoned"}``.
"""

from __future__ import annotations

from reflexr_graph.core import metrics
from reflexr_graph.core.tracing import ATTR_GRAPH
from reflexr_graph.model import LIMIT_WAIT_PREFIX, Status


def run_started(graph: str) -> None:
    """A run's first attempt (or the first after a replay) started."""
    metrics.RUNS_STARTED.add(1, {ATTR_GRAPH: graph})


def attempt_ended(graph: str, outcome: str) -> None:
    """``outcome``: succeeded, failed, fenced (another attempt took over), abandoned (its worker died),
    interrupted (the fleet cut it short), suspended (the run waits for a signal or a timer), cancelled
    (the run was cancelled while it ran; it stopped at a boundary)."""
    metrics.ATTEMPTS.add(1, {ATTR_GRAPH: graph, metrics.ATTR_OUTCOME: outcome})


def suspended(graph: str, signal: str) -> None:
    """A step suspended its run as waiting for ``signal`` ('' for a timer); the attempt ended so."""
    kind = "limit" if signal.startswith(LIMIT_WAIT_PREFIX) else "signal" if signal else "timer"
    metrics.RUNS_SUSPENDED.add(1, {ATTR_GRAPH: graph, metrics.ATTR_WAIT: kind})
    attempt_ended(graph, "suspended")


def held_for_version(graph: str, version: str) -> None:
    """A run began to wait (``waiting_for = version:<v>``): no live worker serves its version."""
    metrics.RUNS_HELD_FOR_VERSION.add(1, {ATTR_GRAPH: graph, metrics.ATTR_VERSION: version})


def run_ended(graph: str, status: Status, reason: str = "") -> None:
    """A run reached a terminal status; a dead one is also a dead letter."""
    attrs = {ATTR_GRAPH: graph, metrics.ATTR_OUTCOME: status.value, metrics.ATTR_REASON: reason}
    metrics.RUNS_ENDED.add(1, attrs)
    if status is Status.DEAD:
        metrics.DEAD_LETTERS.add(1, {ATTR_GRAPH: graph, metrics.ATTR_REASON: reason})


def recovered(graph: str, *, interrupted: bool = False) -> None:
    """The reaper re-enqueued a run whose lease lapsed: its attempt was abandoned, or ``interrupted``
    (the lease lapsed in a Redis outage)."""
    metrics.RUNS_RECOVERED.add(1, {ATTR_GRAPH: graph})
    attempt_ended(graph, "interrupted" if interrupted else "abandoned")
