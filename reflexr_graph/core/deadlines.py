"""Deadlines of the steps in flight, so a step that blocks the event loop is still seen overdue.

``asyncio.timeout`` cancels a step that awaits past its timeout. A step that blocks the loop
in synchronous code never gives the loop a chance to: the heartbeat thread reads these
deadlines instead (fleet/heartbeat.py) and ends the attempt from outside.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from dataclasses import dataclass

BLOCKED_GRACE_S = 0.5
"""How far past its deadline a step must be before it is taken as blocked: ``asyncio.timeout``
fires at the deadline itself, so only a step whose loop is stuck is still in flight by then."""


@dataclass(frozen=True)
class Overdue:
    node: str
    timeout_s: float
    attempt: bool
    """True when the attempt's own timeout passed, rather than one step's."""


class Deadlines:
    """Thread-safe: the attempt's loop adds and removes entries, the heartbeat thread reads them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._steps: dict[int, tuple[str, float, float]] = {}
        """handle -> (node, timeout, deadline); a step without a timeout has an infinite deadline, and
        is kept so that an attempt's timeout can name the step it caught."""
        self._attempt: tuple[float, float] | None = None
        self._last = ""

    @property
    def attempt_timed(self) -> bool:
        """Whether the attempt has a timeout: then every step is registered, so the timeout can
        name the step it caught. Without one, only a step with its own timeout is."""
        return self._attempt is not None

    def start(self, node: str, timeout_s: float | None) -> int:
        handle = next(self._ids)
        deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            self._steps[handle] = (node, timeout_s or 0.0, deadline)
            self._last = node
        return handle

    def end(self, handle: int) -> None:
        with self._lock:
            self._steps.pop(handle, None)

    def attempt(self, timeout_s: float) -> None:
        with self._lock:
            self._attempt = (timeout_s, time.monotonic() + timeout_s)

    def running(self) -> str:
        """The node in flight that started last; once none is (a cancelled step has ended by the
        time its attempt reports the timeout), the last one started; '' before any."""
        with self._lock:
            return self._steps[max(self._steps)][0] if self._steps else self._last

    def overdue(self, grace_s: float = BLOCKED_GRACE_S) -> Overdue | None:
        """The step (or attempt) past its deadline by more than ``grace_s``, if any."""
        now = time.monotonic()
        with self._lock:
            for node, timeout_s, deadline in self._steps.values():
                if now > deadline + grace_s:
                    return Overdue(node, timeout_s, attempt=False)
            if self._attempt is not None and now > self._attempt[1] + grace_s:
                node = self._steps[max(self._steps)][0] if self._steps else ""
                return Overdue(node, self._attempt[0], attempt=True)
        return None
