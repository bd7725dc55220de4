"""The steps of an attempt in flight, so that a failing branch does not throw its siblings away.

When one branch of a fork fails (or times out), pydantic-graph hands the error to the driver
while the other branches are still running; leaving ``Graph.iter`` then cancels them, and
the retry runs them again: for a map of LLM calls, every call in flight is paid twice. So
the driver first lets the steps in flight finish (each records its result as it returns,
core/steps.py), for at most a grace period, and only then lets the attempt fail. A step
with a step timeout ends by that timeout anyway; the grace bounds the others.

The same wait serves a cooperative cancel (a cancel requested while steps run): the steps
in flight finish and are recorded before the attempt ends.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEFAULT_SIBLING_GRACE_S = 60.0
"""How long the steps in flight may take to finish once the attempt is bound to end
(``REFLEXR_SIBLING_GRACE_S``)."""


@dataclass
class InFlight:
    """How many steps of the attempt are running; the loop's own, so no lock is needed."""

    running: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    def enter(self) -> None:
        self.running += 1
        self._idle.clear()

    def leave(self) -> None:
        self.running -= 1
        if self.running <= 0:
            self._idle.set()

    async def settle(self, grace_s: float, *, run_id: str, why: str) -> None:
        """Wait until no step is running, for at most ``grace_s`` seconds."""
        if self.running <= 0 or grace_s <= 0:
            return
        log.info(
            "run %s: %s; letting %d step(s) in flight finish and record their results first "
            "(for at most %gs)",
            run_id,
            why,
            self.running,
            grace_s,
        )
        try:
            async with asyncio.timeout(grace_s):
                await self._idle.wait()
        except TimeoutError:
            log.warning(
                "run %s: %d step(s) still running after %gs; cancelling them (a retry runs them again)",
                run_id,
                self.running,
                grace_s,
            )
