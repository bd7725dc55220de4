"""Rate and concurrency limits on steps, shared by the whole fleet through the store.

``GraphAction(limits={"classify": Limit(key="openai", rate="60/m", concurrency=10)})``: before
the step runs, one round trip to the store (store/lua/limit_acquire.lua) takes a rate token
and a concurrency slot of the key, or says how long to wait. Every graph that names the same
key shares its budget; a key may be computed from the step's context (per tenant).

A slot is a lease: it expires one lease TTL after the attempt last renewed it (the heartbeat
renews the slots it holds), so a worker killed while holding one does not leak it. It goes back
when its step ends, with the write that follows (a branch step's record), else on its own.

Waiting never fails the run. A step waits in place, asynchronously, so the other branches of
a map go on; when the wait would be long (over :data:`WAIT_IN_PLACE_S`) and the attempt holds
nothing of that key itself, the run is suspended as ``waiting`` with a wake time on the due
set (the waits mechanism, core/waits.py), and holds no worker until then.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from reflexr_graph import clock
from reflexr_graph.core import metrics, tracing
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.errors import GraphDefinitionError, Kind, ReflexrError, RunFailure

WAIT_IN_PLACE_S = 5.0
"""While other steps of the attempt run, a limited step waits in place up to this long; a longer
wait releases the run as ``waiting``."""
IDLE_WAIT_S = 1.0
"""While nothing else of the attempt runs, the worker would only idle: a wait longer than this
releases the run at once (about what suspending and waking it again costs), so the worker takes
other runs, of other graphs too, meanwhile."""
SLOT_WAKE_S = 2.0
"""A run released to wait for a concurrency slot is woken to look again after this long."""
POLL_MIN_S = 0.05
POLL_MAX_S = 1.0
"""A concurrency wait polls the store with a growing delay between these (a slot's release is
not announced): a poll is one round trip, so the delay bounds the load of waiters."""
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,199}")
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*(ms|s|m|h|d)\s*")
_PERIOD_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_rate(rate: str) -> float:
    """The emission interval in ms of a rate such as ``"60/m"``, ``"20/s"`` or ``"5/10s"``."""
    found = _RATE.fullmatch(rate)
    if found is None or int(found[1]) < 1:
        raise GraphDefinitionError(
            f"limit rate {rate!r} is not usable; write a count per period, e.g. '60/m', '20/s' or '5/10s' "
            "(periods: ms, s, m, h, d)"
        )
    period_ms = int(found[2] or 1) * _PERIOD_MS[found[3]]
    return period_ms / int(found[1])


@dataclass(frozen=True)
class Limit:
    """A fleet-wide limit on a step.

    Args:
        key: the budget's name; steps of any graph that name the same key share it. A callable
            gets the step's context (``ctx.state``, ``ctx.inputs``) and returns the key, for
            a budget per tenant: ``key=lambda ctx: f"crm:{ctx.state.tenant}"``.
        rate: at most this many starts per period, e.g. ``"60/m"`` (GCRA in the store).
        concurrency: at most this many steps holding the key at once, fleet-wide.
        burst: how many starts may come back to back before the rate spaces them (default 1).
    """

    key: str | Callable[[Any], str]
    rate: str | None = None
    concurrency: int | None = None
    burst: int = 1
    emission_ms: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        if self.rate is None and self.concurrency is None:
            raise GraphDefinitionError("a Limit needs a rate, a concurrency, or both")
        if self.concurrency is not None and self.concurrency < 1:
            raise GraphDefinitionError(f"Limit(concurrency=...) must be at least 1, got {self.concurrency}")
        if self.burst < 1:
            raise GraphDefinitionError(f"Limit(burst=...) must be at least 1, got {self.burst}")
        if isinstance(self.key, str):
            check_key(self.key)
        elif not callable(self.key):
            raise GraphDefinitionError("Limit(key=...) must be a string or a callable of the step's context")
        object.__setattr__(self, "emission_ms", 0.0 if self.rate is None else parse_rate(self.rate))

    def key_for(self, ctx: Any, node: str = "") -> str:
        """The key for this step; a computed key that is not usable fails the run at once."""
        if isinstance(self.key, str):
            return self.key
        try:
            return check_key(str(self.key(ctx)))
        except LimitKeyInvalid as exc:
            # Computed from the step's context, it would be as unusable on every retry.
            raise RunFailure(
                f"step {node!r}: its computed limit key is not usable: {exc}",
                reason="invalid_limit_key",
                permanent=True,
            ) from None


def check_key(key: str) -> str:
    if not KEY_PATTERN.fullmatch(key):
        # Never echo the key: a computed one may carry a tenant's data.
        raise LimitKeyInvalid(
            "a limit key must be 1 to 200 letters, digits or '_.:/@-', starting with a letter or digit"
        )
    return key


class LimitKeyInvalid(GraphDefinitionError):
    """A limit key, given or computed, is not usable as part of a Redis key."""


@dataclass(frozen=True)
class LimitRequest:
    """One acquisition, as the store's script takes it."""

    key: str
    emission_ms: float
    burst: int
    concurrency: int
    member: str
    """The slot's name if one is taken: ``run|attempt|random``, unique per acquisition."""
    node: str
    waited_ms: int
    """How long this step has waited so far; recorded on the run when the grant ends the wait."""
    rate: str | None = None
    """The rate as declared, kept with the key's configuration for operators."""
    max_reserve_ms: int = int(WAIT_IN_PLACE_S * 1000)
    """The longest wait for a rate token the store may reserve rather than refuse."""


@dataclass(frozen=True)
class Grant:
    ok: bool
    retry_after_ms: int = 0
    """When denied: the wait the rate requires, or 0 when only a slot is missing (then poll)."""
    wait_ms: int = 0
    """When granted: how long to wait before starting (a rate token reserved ahead)."""


class LimitPort(Protocol):
    def acquire_limit(self, ctx: AttemptContext, request: LimitRequest) -> Grant:
        """Take a rate token and a slot of ``request.key``, or refuse: one round trip, fenced.

        A rate token may be reserved up to :data:`WAIT_IN_PLACE_S` ahead (the grant says how long
        to wait before starting); a longer wait is refused.
        """
        ...

    def release_slot(self, key: str, member: str) -> None:
        """Give a slot back (one round trip); a slot already lapsed is not an error."""
        ...


class HeldSlots:
    """The slots one attempt holds, which its heartbeat renews (from its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}

    def add(self, member: str, key: str) -> None:
        with self._lock:
            self._held[member] = key

    def discard(self, member: str) -> None:
        with self._lock:
            self._held.pop(member, None)

    def snapshot(self) -> dict[str, str]:
        """member -> key of every slot held now."""
        with self._lock:
            return dict(self._held)

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._held.values()


@dataclass
class Limiter:
    """The limits of one attempt: its port, the slots it holds."""

    port: LimitPort
    ctx: AttemptContext
    held: HeldSlots = field(default_factory=HeldSlots)
    running: int = 0
    """Steps of the attempt running their own code now (on the attempt's loop only)."""
    returning: list[tuple[str, str]] = field(default_factory=list)
    """(key, member) of the slots of steps that ended, not given back yet: the step's next write
    (its branch record, core/journal.py: put) carries them, in the same round trip, and the
    step's end gives back what none carried. No await comes between, so no other step sees them
    held; a crash between leaves them to lapse with their lease, as any held slot."""

    def take_returning(self) -> list[tuple[str, str]]:
        taken, self.returning = self.returning, []
        return taken

    def give_back_now(self) -> None:
        """One release per slot that no write carried."""
        for key, member in self.take_returning():
            self.port.release_slot(key, member)

    def bound_s(self, key: str) -> float:
        """How long a step may wait in place for ``key`` now: long only if the attempt is busy."""
        return WAIT_IN_PLACE_S if self.running or self.held.holds(key) else IDLE_WAIT_S


class WaitTooLong(ReflexrError):
    """Internal: the wait for a limit would be long, so the run should be suspended instead."""

    error_kind = Kind.TIMEOUT

    def __init__(self, key: str, wake_in_ms: int, waited_ms: int = 0) -> None:
        super().__init__(f"limit wait of {wake_in_ms}ms")
        self.key = key
        self.wake_in_ms = wake_in_ms
        self.waited_ms = waited_ms
        """How long the step waited in place before it gave up: counted with the wait it releases."""


def _delay_s(grant: Grant, polls: int) -> float:
    if grant.retry_after_ms > 0:
        return grant.retry_after_ms / 1000 + random.uniform(0, POLL_MIN_S)
    return random.uniform(POLL_MIN_S, min(POLL_MAX_S, POLL_MIN_S * 2 ** min(polls, 8)))


async def _acquire(limiter: Limiter, limit: Limit, key: str, node: str) -> str | None:
    """Wait in place until granted; the slot's member (None for a rate-only limit), or WaitTooLong."""
    member = f"{limiter.ctx.run_id}|{limiter.ctx.attempt}|{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    polls = 0
    attrs = {tracing.ATTR_LIMIT_KEY: key}
    while True:
        waited_ms = int((time.monotonic() - started) * 1000)
        bound = limiter.bound_s(key)
        request = LimitRequest(
            key,
            limit.emission_ms,
            limit.burst,
            limit.concurrency or 0,
            member,
            node,
            waited_ms,
            limit.rate,
            int(bound * 1000),
        )
        grant = limiter.port.acquire_limit(limiter.ctx, request)
        if grant.ok:
            # Granted, even with a start time ahead: the attempt has work, so its other steps may
            # wait in place. holding() gives the count back when the step ends.
            limiter.running += 1
            if grant.wait_ms:
                try:
                    await asyncio.sleep(grant.wait_ms / 1000)
                except BaseException:
                    limiter.running -= 1
                    raise
            if polls or grant.wait_ms:
                metrics.LIMIT_WAIT.record(time.monotonic() - started, attrs)
            return member if limit.concurrency else None
        metrics.LIMIT_DENIED.add(1, attrs)
        delay = _delay_s(grant, polls)
        polls += 1
        waited_s = time.monotonic() - started
        if waited_s + delay > bound:
            # A rate says when its next token comes; a slot's release is not announced, so a run
            # waiting for one looks again after SLOT_WAKE_S.
            wake_in_ms = int(1000 * (delay if grant.retry_after_ms else SLOT_WAKE_S))
            raise WaitTooLong(key, wake_in_ms, int(waited_s * 1000))
        await asyncio.sleep(delay)


@asynccontextmanager
async def holding(limiter: Limiter, limit: Limit, ctx: Any, node: str) -> AsyncIterator[str]:
    """Hold ``limit`` for the step in this block; yields the key. Raises WaitTooLong (see above)."""
    key = limit.key_for(ctx, node)
    member = await _acquire(limiter, limit, key, node)
    try:
        if member is None:
            yield key
            return
        limiter.held.add(member, key)
        metrics.LIMIT_IN_USE.add(1, {tracing.ATTR_LIMIT_KEY: key})
        try:
            yield key
        finally:
            limiter.held.discard(member)
            metrics.LIMIT_IN_USE.add(-1, {tracing.ATTR_LIMIT_KEY: key})
            limiter.returning.append((key, member))
    finally:
        limiter.running -= 1


def wake_at_ms(wait: WaitTooLong) -> int:
    return clock.now_ms() + wait.wake_in_ms


def check_limits(
    limits: Mapping[str, Limit] | None, nodes: Mapping[str, Any], graph: str
) -> dict[str, Limit]:
    """``limits`` as given, refused when it names a node the graph lacks or is not a Limit."""
    found = dict(limits or {})
    for node, limit in found.items():
        if node not in nodes:
            raise GraphDefinitionError(f"graph {graph!r}: limits name node {node!r}, which it does not have")
        if not isinstance(limit, Limit):
            raise GraphDefinitionError(f"graph {graph!r}: the limit of node {node!r} must be a Limit")
    return found
