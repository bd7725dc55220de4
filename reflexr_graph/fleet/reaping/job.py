"""What every job of a reaper pass shares: the pass it acts in, and the one method it has.

A pass makes one read (``reaper_tick.lua``: the lock and every read, one round trip however many
jobs look at it); the jobs after it act on what it found, each change of a run in its own script.
Jobs pass nothing to each other but through :class:`Pass`, so each can be read, and tested, alone,
and the order fleet/reaper.py lists them in is the only place their dependencies are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from reflexr_graph.store.contracts import TickReply


@dataclass
class Pass:
    """One pass of a reaper, as its jobs fill it in."""

    now: float
    """``time.monotonic()`` when the pass began: what the jobs due now and then compare."""
    found: TickReply = field(init=False, repr=False)
    """The pass's one read (reaping/read.py); the jobs listed before the read must not look at it."""
    prune: bool = False
    """Whether the read asked for the finished runs past retention (reaping/prune.py says when)."""
    holding: bool = False
    """Whether this reaper holds the lock this pass, as the read left it (reaping/lock.py)."""
    requeued: int = 0
    """How many runs this pass made due now (reaped, parents woken): the due runs the read found
    miss them, so the dispatch reads the due set again."""


class Job(Protocol):
    """One job of a reaper pass."""

    holder_only: bool
    """True: it runs only in the pass of a reaper holding the lock (it changes runs, and the fleet
    changes each once); False: in every reaper's pass."""

    def run(self, current: Pass) -> None:
        """Do the job if it is due in this pass; a :class:`StoreUnavailable` ends the pass."""
