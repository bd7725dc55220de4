"""A loop's subscription to the nudges that end its sleep early (the reaper's, the scheduler's).

A nudge is a PUBLISH on a channel that a script sends when it makes work sooner than the loop
planned for. The subscription is made before the loop's first pass, so nothing published after
it is missed; when Redis drops it, the loop sleeps as it would have and subscribes again on its
next wait. A nudge lost meanwhile costs at most the loop's longest sleep.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from reflexr_graph.errors import StoreUnavailable

DRAINED = 1000
"""At most this many nudges already received are answered by the one pass they woke."""


class Nudges:
    """The subscription ``subscribe`` makes, while Redis gives one.

    ``fresh_is_nudge``: whether a subscription made again counts as a nudge. It does for a loop
    whose nudges say "read again" (a nudge sent while there was no subscription is lost, so the
    pass reads now instead); not for one that has other means to know when to wake.
    """

    def __init__(self, subscribe: Callable[[], Any], stop: threading.Event, *, fresh_is_nudge: bool) -> None:
        self._subscribe = subscribe
        self._stop = stop
        self._fresh_is_nudge = fresh_is_nudge
        self._sub: Any = None

    def open(self) -> None:
        """Subscribe now, before the loop's first pass (Redis unreachable: on the next wait)."""
        with contextlib.suppress(StoreUnavailable):
            self._sub = self._subscribe()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a nudge; True when one came (the pass runs now)."""
        if self._sub is None:
            try:
                self._sub = self._subscribe()
            except StoreUnavailable:
                self._stop.wait(timeout_s)
                return False
            if self._fresh_is_nudge:
                return True
        try:
            if self._sub.get_message(timeout=timeout_s) is None:
                return False
            # One pass answers every nudge sent so far: a burst of them wakes it once.
            for _ in range(DRAINED):
                if self._sub.get_message(timeout=0) is None:
                    break
        except (RedisError, OSError):
            # Redis went away under the subscription: sleep as before, subscribe again next time.
            self.close()
            self._stop.wait(timeout_s)
            return False
        return True

    def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(RedisError, OSError):
                self._sub.close()
            self._sub = None
