"""The boundary's hand-off to the step after it: the inputs the checkpoint just wrote down.

A checkpoint saved at a boundary writes the next task's inputs down as JSON, and that step keys
its records by the same JSON (core/steps.py: ``StepExecution.prefix``). Handing it over spares the
step writing its inputs down a second time. The driver owns the hand-off (core/driver.py:
``_Saver.boundary`` gives it, at every boundary); the step it names takes it once, as it starts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Written:
    """The next task as a saved boundary wrote it down."""

    node_id: str
    inputs: object
    """The very inputs object the task carries: the step must start with this one."""
    inputs_json: str


@dataclass
class Handoff:
    """What the latest boundary wrote down for the step after it; nothing between two boundaries."""

    _written: Written | None = None

    def give(self, written: Written | None) -> None:
        """At a boundary: what it wrote down (None when it saved nothing)."""
        self._written = written

    def take(self, node_id: str, inputs: object) -> str | None:
        """The JSON of ``inputs`` if the boundary before this step wrote these very inputs down."""
        written = self._written
        if written is None or written.node_id != node_id or written.inputs is not inputs:
            return None
        self._written = None  # one step's: nothing runs between the boundary and that step
        return written.inputs_json
