"""The attempt scope: what one attempt as a whole has, which its steps share.

The driver makes one scope per attempt (core/driver.py: ``run_attempt``) and sets it for the
attempt's context; every step of the attempt finds it with :func:`current_scope`. It holds:

- the attempt's records journal (core/journal.py), which records and replays its durable calls,
  waits and branch results;
- the limiter its limited steps take their slots from, the deadlines of its steps in flight (for
  the heartbeat thread) and the count of those steps (for the driver to let them finish);
- the signals its graph declares, its tally of notes, whether its steps are traced;
- its stream, once a step emits (core/emit.py makes and owns it);
- the hand-off from the driver to the step after a boundary (core/handoff.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from reflexr_graph.core.context import bound
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.handoff import Handoff
from reflexr_graph.core.inflight import InFlight
from reflexr_graph.core.journal import RecordJournal
from reflexr_graph.core.limits import Limiter
from reflexr_graph.core.tally import Tally


class ItemStream(Protocol):
    """The attempt's stream as the scope and the steps see it; ``core/emit.py`` makes it (its
    ``Emitter``) and owns it, so the scope needs no import of emit, which imports the steps."""

    async def flush(self) -> None: ...

    def saved(self) -> None: ...


@dataclass
class AttemptScope:
    """One attempt's limits, deadlines, steps in flight, signals, tracing and stream, and its journal."""

    journal: RecordJournal
    tally: Tally
    signals: Mapping[str, Any] = field(default_factory=dict)
    """The signals the graph declares: name -> type (``GraphAction(..., signals=...)``)."""
    limiter: Limiter | None = None
    """Where the attempt's limited steps take their rate tokens and slots; None: limits are not
    enforced (a port without them)."""
    deadlines: Deadlines = field(default_factory=Deadlines)
    """The deadlines of the steps in flight, for the heartbeat thread to see a blocked one."""
    in_flight: InFlight = field(default_factory=InFlight)
    """The steps running, for the driver to let them finish before the attempt ends (inflight.py)."""
    handoff: Handoff = field(default_factory=Handoff)
    """The inputs the boundary before a step wrote down, from the driver to that step."""
    traced: bool = True
    """Whether an OpenTelemetry SDK was installed when the attempt began: its steps get spans.
    Asked once per attempt, since asking costs a lookup in the environment."""
    stream: ItemStream | None = None
    """Where the attempt's emitted items go (core/emit.py), made by the first ``emit``: an attempt
    whose steps emit nothing costs nothing for it."""

    def saved(self) -> None:
        """A checkpoint was saved: it holds every record and drops the memo, stream marks included."""
        self.journal.saved()
        if self.stream is not None:
            self.stream.saved()

    def return_slots(self) -> None:
        """Give back the slots of ended steps that no write of theirs carried (one round trip each)."""
        if self.limiter is not None:
            self.limiter.give_back_now()


_scope: ContextVar[AttemptScope | None] = ContextVar("reflexr_attempt_scope", default=None)


def current_scope() -> AttemptScope | None:
    """The scope of the attempt running in this context, or None outside one."""
    return _scope.get()


def in_scope(scope: AttemptScope) -> AbstractContextManager[None]:
    """``scope`` is the attempt's scope in this context while the block runs."""
    return bound(_scope, scope)
