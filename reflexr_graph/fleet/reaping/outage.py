"""The job that keeps the outage window: when Redis was unreachable, as this reaper saw it or as
the pass's read found it (a restart or failover since the last pass of any holder).

A lease that lapsed in that window, or within a lease TTL after it, was lost to the outage, not to
a crash: reaping/reap.py reaps its run as an interruption (see reap.lua) rather than charging it an
attempt. So this job runs before the reaping, in every reaper's pass (reachability), and reads
``found.restart`` in the holder's (only a holder's pass marks it).
"""

from __future__ import annotations

import logging
import time

from reflexr_graph import clock
from reflexr_graph.fleet.reaping.job import Pass

log = logging.getLogger(__name__)


class Outage:
    """The last window (epoch ms) in which Redis was unreachable (:attr:`window`), while it matters."""

    holder_only = False

    def __init__(self, lease_ttl_s: float) -> None:
        self.lease_ttl_s = lease_ttl_s
        self.window: tuple[int, int] | None = None
        self._until = 0.0
        self._unreachable_since_ms: int | None = None

    def unreachable(self, since_ms: int) -> None:
        """A pass found Redis unreachable: the window opens at ``since_ms``, unless it is open."""
        if self._unreachable_since_ms is None:
            self._unreachable_since_ms = since_ms

    def run(self, current: Pass) -> None:
        self._reachable()
        if current.holding:
            self._restarted(current.found.restart)

    def _reachable(self) -> None:
        """Redis answered: close the outage window, if one was open, before anything is reaped."""
        if self._unreachable_since_ms is not None:
            self.saw((self._unreachable_since_ms, clock.now_ms()))
            self._unreachable_since_ms = None
            log.warning(
                "Redis is reachable again; runs whose lease lapsed meanwhile resume without losing an attempt"
            )
        elif self.window is not None and time.monotonic() > self._until:
            self.window = None

    def _restarted(self, window: tuple[int, int] | None) -> None:
        """Redis restarted or failed over since the last pass of any reaper holding the lock, in
        ``window`` (the read's pass mark found it), or None.

        This reaper may not have seen that outage: it started after it, or it did not hold the
        lock and another reaper went down with its worker.
        """
        if window is None:
            return
        self.saw(window)
        log.warning(
            "Redis restarted or failed over since the last reaper pass (%.1fs ago); runs whose lease "
            "lapsed meanwhile resume without losing an attempt",
            (window[1] - window[0]) / 1000,
        )

    def saw(self, window: tuple[int, int]) -> None:
        """Leases that lapsed in ``window``, or within a lease TTL after it, were lost to an outage,
        not to a crash: reaped as interruptions (see reap.lua) while one may still lapse so."""
        if self.window is not None:
            window = (min(window[0], self.window[0]), max(window[1], self.window[1]))
        self.window = window
        self._until = time.monotonic() + 2 * self.lease_ttl_s

    def lost_to_outage(self) -> tuple[int, int] | None:
        """When a lease that lapsed was lost to the outage: in it, or up to a lease TTL after it
        ended. Such a lease was last renewed before the outage, or in it, and its renewals fell due
        while Redis could not take them; a lease renewed after the outage lapses later than that."""
        if self.window is None:
            return None
        return (self.window[0], self.window[1] + int(self.lease_ttl_s * 1000))
