"""What the heartbeat thread does for a running attempt besides renewing its lease.

- It renews the concurrency slots the attempt holds (core/limits.py), so they lapse only
  when the attempt stops renewing them: a worker killed while holding slots leaks none.
- It sees a step that blocked the event loop in synchronous code past its timeout, which
  ``asyncio.timeout`` cannot cancel (the loop never gets control back). Then it records the
  attempt's failure (``step_timeout``, naming the node), which gives up the lease and retries
  or dead-letters the run, releases the attempt's slots, and ends the attempt the way Celery
  supports: a prefork pool child exits, and the pool replaces it (the message, acked late, is
  requeued and dropped as early or finished by the claim). A threads or solo pool cannot end
  one thread: the blocked thread runs on until its code returns, and every write it then tries
  is fenced out, since the run is no longer its own.

Detection happens at the heartbeat's next tick (every lease TTL / 3), so a blocked step is
ended between its deadline and a third of a lease TTL later.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import signals

from reflexr_graph.core.deadlines import Deadlines, Overdue
from reflexr_graph.core.limits import HeldSlots
from reflexr_graph.core.policy import tag_node
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.errors import AttemptTimeout, ReflexrError, StepTimeout, StoreUnavailable
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

EXIT_BLOCKED = 70
"""The exit code of a pool child that ended a blocked attempt (EX_SOFTWARE), as Celery logs it."""

_pool_child = False


def _mark_pool_child(**_: Any) -> None:
    global _pool_child
    _pool_child = True


def install() -> None:
    """Learn, in each prefork pool child, that it is one: only a pool child may exit to end an attempt."""
    signals.worker_process_init.connect(_mark_pool_child, weak=False)


def in_pool_child() -> bool:
    return _pool_child


@dataclass
class Watch:
    """The heartbeat's view of one attempt: its slots, its deadlines, and how to fail it from outside."""

    store: RedisStore
    ctx: AttemptContext
    slot_ttl_ms: int
    held: HeldSlots
    deadlines: Deadlines
    fail: Callable[[BaseException], object]
    """Records the attempt's failure (Recorder.failure): fenced, it gives the lease up."""
    exit_process: Callable[[int], None] = os._exit

    def renew_slots(self) -> None:
        try:
            self.store.renew_slots(self.held.snapshot(), slot_ttl_ms=self.slot_ttl_ms)
        except StoreUnavailable:
            log.warning(
                "run %s: Redis unreachable while renewing its limit slots; they hold until their lease "
                "lapses, and are renewed with the next heartbeat",
                self.ctx.run_id,
            )

    def overdue(self) -> Overdue | None:
        return self.deadlines.overdue()

    def end_blocked(self, late: Overdue) -> None:
        """A step blocked the loop past its deadline: record the failure, free the slots, end the attempt."""
        ctx = self.ctx
        exc: ReflexrError = (
            AttemptTimeout(timeout_s=late.timeout_s, node=late.node)
            if late.attempt
            else StepTimeout(node=late.node, timeout_s=late.timeout_s, blocked=True)
        )
        log.error(
            "run %s attempt %d: step %r blocked the event loop past its %gs %s timeout; recording the "
            "failure and giving up the lease, then %s",
            ctx.run_id,
            ctx.attempt,
            late.node,
            late.timeout_s,
            "attempt" if late.attempt else "step",
            "ending this pool child (the pool replaces it)"
            if in_pool_child()
            else "leaving the blocked thread to be fenced out when it returns",
        )
        tag_node(exc, late.node)  # the node's retry policy judges it, as it would a cancelled step
        self.fail(exc)
        for member, key in self.held.snapshot().items():
            try:
                self.store.release_slot(key, member)
            except StoreUnavailable:
                break  # they lapse with their lease
        if in_pool_child():
            logging.shutdown()
            self.exit_process(EXIT_BLOCKED)
