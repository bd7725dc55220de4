"""What one delivery of ``reflexr_graph.run`` came to, as the task reports it to Celery.

The run record in Redis is the truth; this is what the Celery task's own state says, so
that Flower or ``celery events`` show a dead-lettered run's task as failed, not SUCCESS.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    """The attempt finished the graph and recorded its output."""
    RETRYING = "retrying"
    """The attempt failed; the run is retried after a backoff."""
    DEAD = "dead"
    """The run is dead-lettered (permanent failure, out of attempts, bad message)."""
    RELEASED = "released"
    """The worker stopped mid-attempt and handed the run back; it resumes elsewhere at once."""
    FENCED = "fenced"
    """Another attempt owns the run now (or it was cancelled); this one recorded nothing more."""
    DROPPED = "dropped"
    """A duplicate or late delivery: nothing ran."""
    FORWARDED = "forwarded"
    """This worker does not run the graph; the message went on to the graph's own queue."""
    HELD = "held"
    """No live worker runs the graph; the run waits for one (up to the grace period)."""
    CANCELLED = "cancelled"
    """The run was cancelled while the attempt ran; it stopped at a boundary, nothing more runs."""
    SUSPENDED = "suspended"
    """A step waits for a signal or a timer: the run is ``waiting`` and holds no worker until it wakes."""
    UNRECORDED = "unrecorded"
    """The attempt ended but Redis was unreachable; the reaper recovers the run once its lease lapses."""


@dataclass(frozen=True)
class Delivered:
    """One delivery's outcome, with the reason code and a one-line detail for the task's state."""

    outcome: Outcome
    run_id: str
    reason: str = ""
    detail: str = ""

    def as_result(self) -> dict[str, str]:
        """The task's return value: small, JSON, never a payload."""
        return {"run_id": self.run_id, "outcome": self.outcome.value, "reason": self.reason}
