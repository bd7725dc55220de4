"""The journal: work one attempt finished since the latest checkpoint, so a retry does not redo it.

Checkpoints are taken only at quiescent boundaries (docs/design.md#quiescent-boundaries), so
between two of them a fork's branches and a step's calls would be repeated by any retry. The
journal records, in the run's ``memo`` hash, each branch step's result and each
``durable_call``'s result as it finishes; a retry consults it before running anything. The
next checkpoint holds all of that work, and the script that saves it empties the memo.

A record is found by the *step execution* it belongs to:

- the graph's fingerprint, so a changed graph never uses another graph's records;
- the node id and the branch path: the fork ids and item indexes of the task's fork stack
  (node-run ids are left out: an attempt numbers them afresh);
- a digest of the step's inputs, and for a branch result of the state it started from.

Why the digest, and why the items of a map mean the same work on the retry: a retry resumes
from the latest checkpoint, so the tasks it starts from are restored as they were written
down, inputs and state alike. When the boundary before the fork was saved, the fork's items
come from that checkpoint and are the same; when it was not, the steps before the fork run
again and may produce other items, and then the digests differ and nothing recorded is used.
Either way a record is only ever used for the same step, in the same branch, given the same
inputs: what the key says is exactly the work that was done.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from opentelemetry import trace

from reflexr_graph.core import tracing
from reflexr_graph.core.limits import Limiter
from reflexr_graph.core.port import AttemptContext, Lane, Record, RecordPort
from reflexr_graph.errors import Suspended


def digest(*parts: str) -> str:
    """A short, stable digest of JSON texts (or other strings) for a record's key."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()[:24]


LANES_KEPT = 1000
"""Branch steps an attempt records the times of, for the run's timeline: a map over more items
draws its first ones (as the event stream keeps a run's last 1000 events), and keeps the run's
memory bounded."""


@dataclass
class RecordJournal:
    """The records of one attempt: those the claim brought, and those it writes (one round trip each).

    What the attempt as a whole has (its limits, deadlines, steps in flight, stream) is its scope's
    (core/attempt_scope.py), which holds this journal.
    """

    port: RecordPort
    ctx: AttemptContext
    fingerprint: str
    records: dict[str, str] = field(default_factory=dict)
    limiter: Limiter | None = None
    """The attempt's limiter (its scope's): each write carries the slots of the limited steps that
    ended (core/limits.py: Limiter.returning). None: limits are not enforced."""
    keyed_by: str | None = None
    """The fingerprint the records the claim brought are keyed by, when another version of the
    graph wrote them: the run was upgraded to this one from its checkpoint (core/compat.py)."""
    checkpointed: bool = False
    """A checkpoint was saved in this attempt: the records the claim brought are past."""
    lanes: int = 0
    """Branch steps whose times this attempt recorded (or would have, past ``LANES_KEPT``)."""

    @property
    def record_fingerprint(self) -> str:
        """The fingerprint step executions key their records by: the version's that wrote the
        records since the checkpoint resumed from, until this attempt saves one of its own."""
        if self.keyed_by is not None and not self.checkpointed:
            return self.keyed_by
        return self.fingerprint

    def saved(self) -> None:
        """A checkpoint was saved: it holds every record and drops the memo."""
        self.checkpointed = True

    def brought(self, prefix: str) -> dict[str, str]:
        """The records the claim brought under keys that start with ``prefix``, while they count:
        none once this attempt saved a checkpoint."""
        if self.checkpointed:
            return {}
        return {k: v for k, v in self.records.items() if k.startswith(prefix)}

    def get(self, key: str) -> str | None:
        return self.records.get(key)

    def put(self, key: str, value: str, lane: Lane | None = None) -> None:
        """Record ``value`` (JSON) under ``key``, fenced by the attempt's token; the limit slots of
        the step that just ended go back in the same round trip (core/limits.py: Limiter.returning),
        and a branch step's ``lane`` is kept with it, up to ``LANES_KEPT`` of them an attempt."""
        returning = self.limiter.take_returning() if self.limiter is not None else []
        if lane is not None:
            self.lanes += 1
            if self.lanes > LANES_KEPT:
                lane = None
        try:
            self.port.save_record(self.ctx, Record(key, value, lane), returning=returning)
        except BaseException:
            if self.limiter is not None:
                self.limiter.returning.extend(returning)  # the step's end gives them back, or they lapse
            raise
        self.records[key] = value

    def call_retried(
        self, node: str, call: str, try_number: int, error: BaseException, delay_s: float
    ) -> None:
        """Tell the run's history that durable call ``call`` failed try ``try_number`` and is tried
        again in ``delay_s``: one fenced round trip, naming the error's type, never its values."""
        self.port.call_retried(
            self.ctx,
            node=node,
            call=call,
            try_number=try_number,
            error_type=type(error).__name__,
            delay_ms=round(delay_s * 1000),
        )

    def wait(self, key: str, *, signal: str, wake_at_ms: int | None, waited_ms: int = 0) -> str:
        """The record of the wait ``key`` once it is over; raises Suspended when the run must wait.

        One fenced round trip, which takes the signal from the mailbox, sees the timer fired, or
        suspends the run (store/lua/wait.lua).
        """
        result = self.port.wait(
            self.ctx, field=key, signal=signal, wake_at_ms=wake_at_ms, waited_ms=waited_ms
        )
        if result.record is not None:
            self.records[key] = result.record
            return result.record
        attrs: dict[str, str | int] = {tracing.ATTR_SIGNAL: signal}
        if result.wake_at_ms is not None:
            attrs[tracing.ATTR_WAKE_AT] = result.wake_at_ms
        trace.get_current_span().add_event(tracing.EVENT_SUSPENDED, attrs)
        raise Suspended(signal=signal or None, wake_at_ms=result.wake_at_ms)
