"""Retry delays: exponential backoff with full jitter, for a run's retries (fleet/recorder.py) and
a durable call's tries (core/call_retry.py).

Full jitter (a uniform delay between 0 and the exponential cap) spreads the retries of
runs that failed together, say when a dependency went down, instead of sending them all
back at the same moment.
"""

from __future__ import annotations

import random

# 2**62 already exceeds any sane cap; bounding the exponent keeps huge attempt numbers cheap.
_MAX_EXPONENT = 62


def backoff_cap_s(attempt: int, *, base_s: float, max_s: float) -> float:
    """The upper bound of the delay after failed attempt ``attempt`` (1-based)."""
    exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
    return float(min(max_s, base_s * 2**exponent))


def backoff_s(attempt: int, *, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """The delay before retrying after failed attempt ``attempt``: uniform in [0, cap]."""
    cap = backoff_cap_s(attempt, base_s=base_s, max_s=max_s)
    return (rng or random).uniform(0.0, cap)


def backoff_ms(attempt: int, *, base_s: float, max_s: float, rng: random.Random | None = None) -> int:
    """:func:`backoff_s` in whole milliseconds, the unit the store's due times use."""
    return int(backoff_s(attempt, base_s=base_s, max_s=max_s, rng=rng) * 1000)
