"""Writing while the lease holds: the fenced retry of every write an attempt makes.

Every write of an attempt is fenced by its claim's token, so an attempt that lost the run
(to the reaper, a duplicate delivery or a cancel) records nothing more (G3). The lease is
the attempt's right to the run for its TTL whatever Redis does meanwhile: a write that finds
Redis unreachable is retried for as long as the lease still holds, so a short outage costs
nothing, and given up once the lease would have lapsed, when the reaper takes over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

from reflexr_graph.errors import FencedOut, StoreUnavailable

T = TypeVar("T")

log = logging.getLogger(__name__)

LeaseLeft = Callable[[], float]
"""Seconds until the attempt's lease would lapse."""
SAY_EVERY_S = 10.0
"""While a write keeps failing, how often it says so: at its first failure, then this often."""


class Written(StrEnum):
    OK = "ok"
    FENCED = "fenced"
    """Another attempt owns the run (or it was cancelled): this one may write nothing more."""
    UNREACHABLE = "unreachable"
    """Redis stayed unreachable for as long as the lease held."""


def fenced_write(
    lease_left_s: LeaseLeft, op: Callable[[], T], what: str = "an attempt's write"
) -> tuple[Written, T | None]:
    """:func:`while_leased`, its outcome as a :class:`Written`: for a caller that records how the
    attempt ended (fleet/recorder.py) rather than raising it."""
    try:
        return Written.OK, while_leased(lease_left_s, op, what)
    except FencedOut:
        return Written.FENCED, None
    except StoreUnavailable:
        return Written.UNREACHABLE, None


def while_leased(lease_left_s: LeaseLeft, op: Callable[[], T], what: str = "an attempt's write") -> T:
    """Run one of the attempt's fenced writes, retrying while Redis is unreachable and the lease holds.

    Giving up at once would throw the attempt away; ``lease_left_s`` says how long its right
    to the run lasts. ``what`` names the write in the warning a retry logs now and then. The
    write's FencedOut (another attempt owns the run) passes as it is, and StoreUnavailable is
    raised once the lease would lapse.
    """
    delay = 0.1
    said = -SAY_EVERY_S
    while True:
        try:
            return op()
        except StoreUnavailable as exc:
            left = lease_left_s()
            if left <= delay:
                raise StoreUnavailable(
                    f"Redis stayed unreachable while the lease held; {what} not saved"
                ) from exc
            if time.monotonic() - said >= SAY_EVERY_S:
                said = time.monotonic()
                log.warning(
                    "%s not written yet (%s); retrying while the lease holds, %.1fs more", what, exc, left
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def lease_from_now(ttl_s: float) -> LeaseLeft:
    """The lease of a claim just taken, for an attempt that renews none (no heartbeat runs)."""
    until = time.monotonic() + ttl_s
    return lambda: until - time.monotonic()
