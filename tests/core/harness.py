"""Drive real attempts of a GraphAction against the Redis store, as a worker would, minus Celery."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from reflexr_graph import GraphAction
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.port import AttemptContext, Boundary
from reflexr_graph.core.tally import Tally
from reflexr_graph.store.records import saved_next_nodes
from reflexr_graph.store.redis_store import RedisStore

LEASE_MS = 30_000


class Harness:
    def __init__(self, store: RedisStore, now: list[float]) -> None:
        self.store = store
        self.now = now
        self.ctx: AttemptContext | None = None
        self.recorded: tuple[Any, Any] = (None, None)

    def create(self, action: GraphAction, inputs: Any, state: Any = None) -> str:
        run_id = f"run-{uuid.uuid4().hex[:12]}"
        self.store.create_run(
            run_id,
            graph=action.name,
            inputs_json=json.dumps(inputs),
            state_json=None if state is None else json.dumps(state),
            max_attempts=10,
            dispatch_grace_ms=60_000,
        )
        return run_id

    def claim(self, run_id: str) -> AttemptContext:
        claim = self.store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=LEASE_MS)
        if claim.outcome == "busy":
            # The previous attempt "crashed" without recording anything: let its lease lapse.
            self.now[0] += LEASE_MS / 1000 + 1
            self.store.reap()  # as the fleet's reaper would: an abandoned attempt
            claim = self.store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=LEASE_MS)
        assert claim.outcome == "claimed", claim
        self.ctx = claim.context()
        self.recorded = (json.loads(claim.inputs_json), json.loads(claim.state_json or "null"))
        return self.ctx

    def attempt(
        self,
        action: GraphAction,
        run_id: str,
        inputs: Any = None,
        state: Any = None,
        *,
        crash_before_success: bool = False,
        sibling_grace_s: float = 30.0,
    ) -> Any:
        """One attempt, as a worker runs it: the run's recorded inputs and state (unless given), then
        the output recorded with its finished checkpoint. A step's exception is recorded as a failed
        attempt (retrying) and re-raised. ``crash_before_success`` saves the finished checkpoint but
        not the outcome, as a store that lost the second half of a write would."""
        ctx = self.claim(run_id)
        recorded_inputs, recorded_state = self.recorded
        inputs = recorded_inputs if inputs is None else inputs
        state = recorded_state if state is None else state
        tally = Tally(action.name, run_id)
        try:
            finished = asyncio.run(
                run_attempt(
                    action, self.store, ctx, inputs=inputs, state=state, tally=tally,
                    sibling_grace_s=sibling_grace_s,
                )
            )  # fmt: skip
        except Exception as exc:
            self.store.fail(
                ctx,
                error_type=type(exc).__name__,
                message="step failed",
                traceback="",
                reason="step_failed",
                permanent=False,
                retry_delay_ms=0,
                notes=tally.take(),
            )
            raise
        if crash_before_success:
            self.store.save_checkpoint(ctx, Boundary(finished.checkpoint, seq=finished.seq, next_node=None))
        else:
            self.store.succeed(
                ctx, json.dumps(finished.output), checkpoint=finished.checkpoint, seq=finished.seq,
                notes=tally.take(),
            )  # fmt: skip
        return finished.output

    def checkpoint(self, run_id: str) -> dict[str, Any] | None:
        raw = self.store.load_checkpoint(run_id)
        return None if raw is None else json.loads(raw)

    def progressed(self, run_id: str) -> list[str]:
        """The next_node of each checkpoint the events tell (the finished one: ''), in order."""
        return saved_next_nodes(self.store.events(run_id))
