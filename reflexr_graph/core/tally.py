"""What an attempt tells the store about its run beside checkpoints: skipped boundaries, reused work.

A boundary that is not saved is not an error (a retry resumes from the one before), but a
graph whose state cannot be written down would otherwise run with no durability at all
while looking healthy. So each kind of skipped boundary is logged at WARNING once per
attempt, counted in ``reflexr.checkpoint.skipped``, and handed to the store with the
attempt's next write, which adds it to the run's ``skipped_boundaries`` and its history.
Branch steps and durable calls answered from their records are counted the same way.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from reflexr_graph.core import metrics
from reflexr_graph.core.port import NO_NOTES, Notes
from reflexr_graph.core.tracing import ATTR_GRAPH, ATTR_NODE

log = logging.getLogger(__name__)


class SkipReason(StrEnum):
    UNTYPED = "untyped"
    """The next node's input type is not known (no annotation, a transform, a join's value...)."""
    STATE = "state"
    """The graph state does not read back through its type."""
    INPUTS = "inputs"
    """The graph's inputs do not read back through their type."""
    NODE_INPUTS = "node_inputs"
    """The next node's inputs do not read back as they were (another class, a one-shot iterator)."""


_ADVICE = {
    SkipReason.UNTYPED: "name its input type with GraphAction(input_types={...})",
    SkipReason.STATE: "give every state field a type pydantic writes down and reads back as it was",
    SkipReason.INPUTS: "give the graph an input type pydantic writes down and reads back as it was",
    SkipReason.NODE_INPUTS: "return a value of the next step's declared type (not a subclass or an iterator)",
}


@dataclass
class Tally:
    """One attempt's skipped boundaries (by node and reason) and reused work, since its last write."""

    graph: str
    run_id: str
    pending: Counter[tuple[str, SkipReason]] = field(default_factory=Counter)
    logged: set[tuple[str, SkipReason]] = field(default_factory=set)
    reused_steps: int = 0
    reused_calls: int = 0
    noted: set[str] = field(default_factory=set)

    def note_once(self, node_id: str, message: str) -> None:
        """Log ``message`` (with ``%s`` for the node) at WARNING, once per node per attempt."""
        if node_id in self.noted:
            return
        self.noted.add(node_id)
        log.warning(f"run %s: {message}", self.run_id, node_id)

    def skip(self, node_id: str, reason: SkipReason, why: str = "") -> None:
        """Note one boundary before ``node_id`` that was not saved."""
        kind = (node_id, reason)
        self.pending[kind] += 1
        metrics.CHECKPOINT_SKIPPED.add(
            1, {ATTR_GRAPH: self.graph, ATTR_NODE: node_id, metrics.ATTR_REASON: reason.value}
        )
        if kind in self.logged:
            return
        self.logged.add(kind)
        log.warning(
            "run %s: the boundary before %s is not checkpointed (%s%s); a retry resumes from the boundary "
            "before it, repeating the steps in between. To make it durable, %s",
            self.run_id,
            node_id,
            reason.value,
            f": {why}" if why else "",
            _ADVICE[reason],
        )

    def take(self) -> Notes:
        """What happened since the last write, for the store to record with the next one."""
        if not self.pending and not self.reused_steps and not self.reused_calls:
            return NO_NOTES
        kinds = "; ".join(
            f"{node}: {reason.value} x{n}" for (node, reason), n in sorted(self.pending.items())
        )
        taken = Notes(sum(self.pending.values()), kinds, self.reused_steps, self.reused_calls)
        self.pending.clear()
        self.reused_steps = self.reused_calls = 0
        return taken
