"""The checkpoint port of one attempt: the store as the running graph sees it.

The checkpoint and the records came with the claim, so loading them costs nothing. Every
save, record, wait and limit acquisition is a fenced write retried while the lease holds
(fleet/fenced.py), raised as the driver expects when it cannot land: ``FencedOut`` when
another attempt owns the run, ``StoreUnavailable`` when Redis stayed unreachable. A wait
that suspends the run is noted here, so the attempt ends as suspended whatever the graph
raises on its way out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from reflexr_graph.core.limits import Grant, LimitRequest
from reflexr_graph.core.port import AttemptContext, Boundary, Emission, Record, WaitResult
from reflexr_graph.errors import NotInRun, StoreUnavailable
from reflexr_graph.fleet.fenced import LeaseLeft, while_leased
from reflexr_graph.store.children import ChildRequest
from reflexr_graph.store.hot_path import HotPath
from reflexr_graph.store.redis_store import RedisStore

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Suspension:
    """A step suspended the run: what it waits for ('' for a sleep) and when its timer wakes it."""

    signal: str
    wake_at_ms: int | None


@dataclass(frozen=True)
class ChildSender:
    """What making a child run takes from the worker: its attempt budget and its message."""

    max_attempts: Callable[[str], int]
    send: Callable[[str, str], None]
    """Send the Celery message of child run ``run_id`` of ``graph``."""
    grace_ms: int
    """When the reaper sends the child's message should ``send``'s be lost."""


@dataclass
class AttemptPort:
    """The checkpoint port of one attempt: the checkpoint came with the claim, so loading it costs
    nothing; a save that finds Redis unreachable is retried for as long as the lease holds."""

    store: RedisStore
    claimed: str | None
    records: Mapping[str, str]
    lease_left_s: LeaseLeft
    on_suspend: Callable[[], None] = lambda: None
    """Called once the store suspended the run: the lease is given back, so stop renewing it."""
    suspension: Suspension | None = None
    """Set when a step suspended the run: the attempt ends as suspended, whatever it raises next."""
    slot_ttl_ms: int = 30_000
    """How long a limit slot holds without renewal: the lease TTL."""
    stream_max_items: int = 10_000
    """The most items the run's stream may hold (REFLEXR_STREAM_MAX_ITEMS)."""
    hot: HotPath | None = None
    """What sends the attempt's saves and records: its held connection (store/hot_path.py), the
    store's client when None (a cluster store)."""
    children: ChildSender | None = None
    """How the attempt's child runs get their attempt budget and their message; None: this
    attempt cannot make child runs."""

    def make_child(
        self, ctx: AttemptContext, *, graph: str, inputs_json: str, tags: Mapping[str, str], record: str
    ) -> str:
        children = self.children
        if children is None:
            raise NotInRun("this attempt cannot make child runs: its worker gave it no way to send them")
        request = ChildRequest(graph, inputs_json, dict(tags), children.max_attempts(graph), record)
        child, created = self._write(
            ctx,
            f"child run of {graph}",
            lambda: self.store.make_child(ctx, request, dispatch_grace_ms=children.grace_ms),
        )
        if created:
            # Should this send be lost, the child's due entry has the reaper send it.
            children.send(child, graph)
        return child

    def wait_children(
        self, ctx: AttemptContext, children: Sequence[str], waiting_for: str
    ) -> list[str] | None:
        ended = self._write(
            ctx, f"wait for {waiting_for}", lambda: self.store.wait_for_children(ctx, children, waiting_for)
        )
        if ended is None:
            self.suspension = Suspension(waiting_for, None)
            self.on_suspend()
        return ended

    def child_output(self, child_id: str) -> str | None:
        return self.store.child_output(child_id)

    def append_stream(self, ctx: AttemptContext, items: Sequence[Emission], after: int) -> int:
        return self._write(
            ctx,
            f"{len(items)} stream items",
            lambda: self.store.append_stream(ctx, items, after, max_items=self.stream_max_items),
        )

    def call_retried(
        self, ctx: AttemptContext, *, node: str, call: str, try_number: int, error_type: str, delay_ms: int
    ) -> None:
        self._write(
            ctx,
            f"retry of durable call {call!r}",
            lambda: self.store.call_retried(
                ctx, node=node, call=call, try_number=try_number, error_type=error_type, delay_ms=delay_ms
            ),
        )

    def wait(
        self, ctx: AttemptContext, *, field: str, signal: str, wake_at_ms: int | None, waited_ms: int = 0
    ) -> WaitResult:
        what = f"wait for {'signal ' + repr(signal) if signal else 'a timer'}"
        result = self._write(
            ctx,
            what,
            lambda: self.store.wait(
                ctx, field=field, signal=signal, wake_at_ms=wake_at_ms, waited_ms=waited_ms
            ),
        )
        if result.record is None:
            self.suspension = Suspension(signal, result.wake_at_ms)
            self.on_suspend()
        return result

    def open_event(self, ctx: AttemptContext, *, token: str, entry_json: str, name: str) -> None:
        self._write(
            ctx,
            f"wait for event {name!r}",
            lambda: self.store.open_event(ctx, token=token, entry_json=entry_json, name=name),
        )

    def settle_event(self, ctx: AttemptContext, *, token: str, answer_json: str) -> str:
        return self._write(
            ctx,
            "an event's timeout",
            lambda: self.store.settle_event(ctx, token=token, answer_json=answer_json),
        )

    def acquire_limit(self, ctx: AttemptContext, request: LimitRequest) -> Grant:
        return self._write(
            ctx,
            f"limit {request.key}",
            lambda: self.store.acquire_limit(ctx, request, slot_ttl_ms=self.slot_ttl_ms),
        )

    def release_slot(self, key: str, member: str) -> None:
        try:
            self.store.release_slot(key, member)
        except StoreUnavailable:
            log.warning(
                "a slot of limit %s could not be given back (Redis unreachable); it lapses with its lease",
                key,
            )

    def load_checkpoint(self, run_id: str) -> str | None:
        return self.claimed

    def load_records(self, run_id: str) -> Mapping[str, str]:
        return self.records

    def save_record(
        self, ctx: AttemptContext, record: Record, *, returning: Sequence[tuple[str, str]] = ()
    ) -> None:
        self._write(
            ctx,
            f"record {record.field.split('|', 1)[0]}",
            lambda: self.store.save_record(ctx, record, returning=returning, via=self.hot),
        )

    def save_checkpoint(
        self, ctx: AttemptContext, boundary: Boundary, *, returning: Sequence[tuple[str, str]] = ()
    ) -> bool | None:
        return self._write(
            ctx,
            f"checkpoint {boundary.seq}",
            lambda: self.store.save_checkpoint(ctx, boundary, returning=returning, via=self.hot),
        )

    def _write(self, ctx: AttemptContext, what: str, op: Callable[[], T]) -> T:
        """One fenced write of the running graph, retried while the lease holds: its FencedOut as the
        store raised it, StoreUnavailable once the lease would lapse."""
        return while_leased(self.lease_left_s, op, f"run {ctx.run_id}: {what}")
