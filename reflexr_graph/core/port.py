"""The store port: what the attempt driver needs from storage, and nothing more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class AttemptContext:
    """Who is running: the run, this attempt's fencing token and its counters.

    ``resume_seq`` increases on every claim of the run and never resets (replay resets
    ``attempt``), so it can prefix fork-stack ids without colliding with an earlier resume.
    """

    run_id: str
    token: str
    attempt: int
    resume_seq: int
    idempotency_key: str
    graph: str
    trace_context: str = ""
    """The run's trace (W3C headers as JSON): every attempt's span joins it, '' for a fresh trace."""


@dataclass(frozen=True)
class Skipped:
    """Boundaries an attempt could not checkpoint since its last write: how many, and which kinds.

    ``kinds`` is a short text for operators (``"s2: state does not read back; d1: untyped"``),
    never a value.
    """

    count: int = 0
    kinds: str = ""


NO_SKIPS = Skipped()


class CheckpointPort(Protocol):
    """Checkpoint storage, fenced by the attempt's token.

    ``save_checkpoint`` is one round trip. It raises ``errors.FencedOut`` when the token
    no longer owns the run, and ``errors.StoreUnavailable`` when storage cannot be reached.
    """

    def load_checkpoint(self, run_id: str) -> str | None:
        """The latest checkpoint's JSON, or None when the run has none."""
        ...

    def save_checkpoint(
        self,
        ctx: AttemptContext,
        payload: str,
        *,
        seq: int,
        next_node: str | None,
        skipped: Skipped = NO_SKIPS,
    ) -> None:
        """Replace the run's checkpoint and append a ``run_progressed`` event, if ``ctx.token`` owns it.

        ``skipped`` counts the boundaries not saved since the attempt's previous save, recorded
        with this one.
        """
        ...
