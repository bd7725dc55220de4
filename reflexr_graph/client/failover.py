"""Clients ride out a failover: a request Redis could not answer is tried again, for a bounded time.

During a Sentinel or Redis Cluster failover the primary is gone for seconds before a replica is
promoted: a client's request meets a refused connection, a timeout, READONLY or CLUSTERDOWN.
Workers wait such an outage out; a producer or an operator waiting on a run must too. So both
clients (and the CLI and the API, which use them) pass every request of an operation through
:func:`call` or :func:`call_async`: one policy, in a blocking and an awaited variant.

- A ``StoreUnavailable`` is retried with a short backoff for up to ``REFLEXR_CLIENT_RETRY_S``
  (``Settings.client_retry_s``), then raised, saying what was waited for and how long.
- Never retried: ``RedisMisconfigured`` (a password, a database number: waiting cannot help), a
  full store (out of memory: the fix is an operator's), and, on a plain Redis this client has
  never reached, a refused or unresolvable connection: that is most likely a wrong URL, said at
  once. (On Sentinel or a cluster the primary may be moving even at first contact.)
- A write that is not idempotent (an enqueue without an idempotency key, a signal, a cancel...)
  is repeated only when Redis surely did not get it (the connection was refused, or the server
  refused it in a transient state). When the connection was lost after the request was sent, it
  may or may not have been applied: that is raised, with what to do, rather than guessed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from reflexr_graph import errors
from reflexr_graph.store.ops import Batch, Command, Envelope, Layout, Request

T = TypeVar("T")

log = logging.getLogger("reflexr_graph.client")

FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0

NOT_RECEIVED = frozenset(
    {
        "refused",
        "dns",
        "read_only",
        "no_replicas",
        "cluster_down",
        "loading",
        "busy",
        "master_down",
        "try_again",
        "max_clients",
    }
)
"""Kinds of StoreUnavailable (store/connection_errors.py) after which Redis surely applied nothing:
no connection was made, or the server refused the request in a passing state."""
FIRST_CONTACT = frozenset({"refused", "dns", "timeout", "closed", "unavailable"})
"""Network kinds that, before a plain Redis ever answered this client, mean a wrong URL more likely
than an outage."""
NEVER = frozenset({"out_of_memory", "tls_mismatch"})
"""Kinds that waiting does not cure: a full store waits for an operator, TLS on one side for a fix."""

READ_METHODS = frozenset(
    {
        "get", "mget", "exists", "type", "ttl", "pttl", "time", "ping", "info", "config_get",
        "hget", "hmget", "hgetall", "hexists", "hlen", "hkeys", "hvals", "hscan",
        "lrange", "llen", "lindex", "smembers", "sismember", "smismember", "scard", "sscan",
        "zrange", "zrangebyscore", "zrevrange", "zrevrangebyscore", "zscore", "zmscore", "zcard",
        "zcount", "zrank", "zrevrank", "zscan", "xrange", "xrevrange", "xread", "xlen", "xinfo_stream",
        "scan", "scan_iter", "dbsize", "memory_usage", "strlen", "getrange",
    }
)  # fmt: skip
"""Commands that change nothing, so repeating them is safe whatever the operation they serve."""


@dataclass(frozen=True)
class Repeat:
    """How the requests of one client call may be repeated while Redis is unavailable.

    ``unsure`` is None for a call that is safe to repeat (a read, an idempotent write); for a write
    that is not, it is what to tell the caller when Redis may or may not have applied it. A
    ``probe`` (``ping``: health checks) answers at once and is never retried.
    """

    unsure: str | None = None
    probe: bool = False


READ = Repeat()
PROBE = Repeat(probe=True)
WRITE = Repeat(
    unsure="Redis may or may not have applied it: read the run (or schedule) back before trying again"
)
ENQUEUE = Repeat(
    unsure="the run may or may not have been recorded: enqueue with an idempotency key "
    "(idempotency_key=..., --idempotency-key), which is safe to retry, or look for the run before "
    "enqueueing it again"
)


def keyed(idempotency_key: str | None, unkeyed: Repeat = ENQUEUE) -> Repeat:
    """An enqueue (or fork) with an idempotency key is safe to repeat: the key names the same run."""
    return READ if idempotency_key else unkeyed


@dataclass
class FailoverPolicy:
    """One client's policy: how long it retries, and whether its Redis fails over (Sentinel, cluster)."""

    retry_s: float
    fails_over: bool
    reached: bool = False
    """Whether Redis has answered this client once: an outage from then on is not a wrong URL."""

    def answered(self, request: Request) -> None:
        """Note a request answered: one that went to Redis (or the broker) proves the URL right."""
        if not isinstance(request, Layout | Envelope):  # answered by the client itself
            self.reached = True

    def retryable(self, exc: errors.StoreUnavailable, repeat: Repeat) -> bool:
        if repeat.probe or isinstance(exc, errors.RedisMisconfigured) or exc.kind in NEVER:
            return False
        return self.reached or self.fails_over or exc.kind not in FIRST_CONTACT


def _safe(request: Request, repeat: Repeat) -> bool:
    """Whether ``request`` may be sent again whatever became of it."""
    if repeat.unsure is None or isinstance(request, Layout | Envelope):
        return True
    if isinstance(request, Command):
        return request.method in READ_METHODS
    if isinstance(request, Batch):
        return all(isinstance(c, Command) and c.method in READ_METHODS for c in request.commands)
    return False  # a script (Eval) or a message (Publish): it writes


class Outage:
    """The retries of one request: when it began, and how long to pause before the next try."""

    def __init__(self, policy: FailoverPolicy, request: Request, repeat: Repeat) -> None:
        self.policy, self.request, self.repeat = policy, request, repeat
        self.began: float | None = None
        self.pause_s = FIRST_PAUSE_S

    def pause(self, exc: errors.StoreUnavailable) -> float:
        """Seconds to wait before trying again; raises when the request must not be tried again."""
        if not self.policy.retryable(exc, self.repeat):
            raise exc
        if not _safe(self.request, self.repeat) and exc.kind not in NOT_RECEIVED:
            raise type(exc)(f"{exc}; {self.repeat.unsure}", endpoint=exc.endpoint, kind=exc.kind) from exc
        now = time.monotonic()
        if self.began is None:
            self.began = now
            log.warning(
                "%s; the client tries again for up to %gs (REFLEXR_CLIENT_RETRY_S), as a failover or "
                "restart would need",
                exc,
                self.policy.retry_s,
            )
        left = self.began + self.policy.retry_s - now
        if left <= 0:
            waited = now - self.began
            raise type(exc)(
                f"{exc} (still, after waiting {waited:.1f}s for Redis to answer again, as a failover "
                f"or restart would: REFLEXR_CLIENT_RETRY_S={self.policy.retry_s:g})",
                endpoint=exc.endpoint,
                kind=exc.kind,
            ) from exc
        pause, self.pause_s = min(self.pause_s, left), min(self.pause_s * 2, MAX_PAUSE_S)
        return pause


def call(policy: FailoverPolicy, handle: Callable[[Request], Any], request: Request, repeat: Repeat) -> Any:
    """``handle(request)``, tried again while Redis is unavailable, as the policy allows (blocking)."""
    outage = Outage(policy, request, repeat)
    while True:
        try:
            reply = handle(request)
        except errors.StoreUnavailable as exc:
            time.sleep(outage.pause(exc))
            continue
        policy.answered(request)
        return reply


async def call_async(
    policy: FailoverPolicy, handle: Callable[[Request], Awaitable[Any]], request: Request, repeat: Repeat
) -> Any:
    """:func:`call`, awaited: the same policy for ``AsyncClient``."""
    outage = Outage(policy, request, repeat)
    while True:
        try:
            reply = await handle(request)
        except errors.StoreUnavailable as exc:
            await asyncio.sleep(outage.pause(exc))
            continue
        policy.answered(request)
        return reply
