"""The one clock of reflexr-graph. Tests fake time by replacing ``clock.now``'s source."""

from __future__ import annotations

import time
from collections.abc import Callable

_source: Callable[[], float] = time.time


def now() -> float:
    """Seconds since the epoch, from the current time source."""
    return _source()


def now_ms() -> int:
    """Milliseconds since the epoch: the unit Redis scores and Lua scripts use."""
    return int(now() * 1000)


def set_source(source: Callable[[], float]) -> Callable[[], float]:
    """Replace the time source (tests only); returns the previous one so it can be restored."""
    global _source
    previous, _source = _source, source
    return previous
