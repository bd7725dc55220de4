"""The one clock of reflexr-graph: the store's. Tests fake time by replacing ``clock.now``'s source.

Every lease expiry, due time, limit token and presence TTL is compared in the scripts against a
``now`` the caller passes, so every process of the fleet must agree on it: a worker whose wall clock
is two minutes ahead would otherwise see its peers' leases lapse. So ``now`` is Redis's time. The
store layer samples it (``TIME``, with the round trip measured around it: :func:`probe`) before a
process's first time-dependent call and again every ``RESAMPLE_S``; between samples the clock
carries the sample forward on ``time.monotonic()``, so a step of the wall clock (NTP, a laptop that
slept) changes nothing. Its error is half the sample's round trip plus the monotonic clock's drift
since (parts per million). Before the first sample, and when no store answered, it is the local
wall clock. This module imports no redis: the store (``StoreBase.sample_clock``) feeds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

RESAMPLE_S = 60.0
"""A process samples the store's time again this long after its last sample: bounds the monotonic
clock's drift to milliseconds. A worker's full presence beat (about every 60 s) samples on its own."""
SKEW_WARN_MS = 1000
"""A worker whose wall clock is further than this off the store's says so (a WARNING, and ``workers``
marks it): the fleet keeps the store's time, but the host's NTP needs fixing."""
RETRY_S = 1.0
"""After a first sample that got no answer, the next is not tried before this: an outage must not
double every call's wait for a connection, and once Redis answers a process soon has its time."""


@dataclass(frozen=True)
class Sample:
    """One reading of the store's time."""

    server_ms: float
    """The store's time, epoch ms, as its ``TIME`` read it."""
    at: float
    """``time.monotonic()`` when it read it: the middle of the round trip."""
    skew_ms: float
    """The local wall clock minus the store's time, ms, at the sample: positive when this process's
    clock is ahead."""
    round_trip_ms: float
    """The round trip around the reading: the sample's error is at most half of it."""


class Probe:
    """A sample being taken: start it just before the request that reads the store's time."""

    def __init__(self) -> None:
        global _next_sample
        self._sent, self._wall = time.monotonic(), time.time()
        # If no answer is recorded: with no sample yet, try again after RETRY_S; with one, it is
        # still good (drift is ppm), so after another RESAMPLE_S.
        _next_sample = self._sent + (RETRY_S if _sample is None else RESAMPLE_S)

    def record(self, server_ms: float) -> Sample:
        """The reading arrived: from now on the clock is the store's time, carried from this sample."""
        global _sample, _next_sample
        received, wall = time.monotonic(), time.time()
        sample = Sample(
            server_ms=float(server_ms),
            at=(self._sent + received) / 2,
            skew_ms=(self._wall + wall) / 2 * 1000 - server_ms,
            round_trip_ms=(received - self._sent) * 1000,
        )
        _sample, _next_sample = sample, received + RESAMPLE_S
        return sample


_sample: Sample | None = None
_next_sample = 0.0


def _store_time() -> float:
    """The store's time carried on the monotonic clock from the last sample; the wall clock before one."""
    sample = _sample
    if sample is None:
        return time.time()
    return sample.server_ms / 1000 + (time.monotonic() - sample.at)


_source: Callable[[], float] = _store_time


def now() -> float:
    """Seconds since the epoch, from the current time source."""
    return _source()


def now_ms() -> int:
    """Milliseconds since the epoch: the unit Redis scores and Lua scripts use."""
    return int(now() * 1000)


def set_source(source: Callable[[], float]) -> Callable[[], float]:
    """Replace the time source (tests only); returns the previous one so it can be restored.

    A source set here overrides the store's time until the previous one is restored."""
    global _source
    previous, _source = _source, source
    return previous


def probe() -> Probe:
    """Start a sample of the store's time (the store layer sends the request and records its answer)."""
    return Probe()


def due() -> bool:
    """Whether this process should sample the store's time now: it never has, its sample is
    ``RESAMPLE_S`` old, and no sample failed within ``RETRY_S``. Never while a test's source is set."""
    return _source is _store_time and time.monotonic() >= _next_sample


def last_sample() -> Sample | None:
    """The latest sample of the store's time in this process, or None before the first."""
    return _sample


def skew_ms() -> int | None:
    """The local wall clock minus the store's time at the latest sample, ms; None before one."""
    sample = _sample
    return None if sample is None else round(sample.skew_ms)


def forget() -> None:
    """Drop the sample: back to the wall clock until the next (tests of the fallback)."""
    global _sample, _next_sample
    _sample, _next_sample = None, 0.0
