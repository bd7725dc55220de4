"""What every part of the store shares: the client, the scripts, error translation, helpers.

``RedisStore`` (redis_store.py) is assembled from one class per concern, each a subclass of
:class:`StoreBase`: an attempt's writes, recovery, operator actions, reads, the worker
registry. Every change that touches more than one key is one Lua script (``lua/``); every
"now" comes from ``clock.now_ms()`` and is passed to the scripts, which never read the
server's clock; Redis being unreachable is always reported as ``errors.StoreUnavailable``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, Self, TypeVar

import redis
from redis import exceptions as redis_errors

from reflexr_graph import errors
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.model import RunInfo
from reflexr_graph.store import connection_errors, keys
from reflexr_graph.store.records import (
    pairs_to_map,
    request_digest,
    run_info,
    text,
)
from reflexr_graph.store.scripts import Scripts
from reflexr_graph.store.tls import HandshakeBoundSSLConnection

P = ParamSpec("P")
R = TypeVar("R")

ScriptArg = str | int | float

DEFAULT_RUN_RETENTION_S = 7 * 86400
DEFAULT_DEAD_RETENTION_S = 30 * 86400
DEFAULT_MAX_INTERRUPTIONS = 20
DEFAULT_CHECKPOINT_HISTORY = 100

# A script answers {'idem', key} when it was called with a wrong guess of the run's
# idempotency key; the key of a run never changes, so one more round always settles it.
_IDEM_ROUNDS = 3
# Tracebacks of deep recursion can be megabytes; the end holds the frames that matter.
TRACEBACK_LIMIT = 64 * 1024
EVENTS_MAXLEN = 1000
"""Approximate cap of a run's event stream; the per-run scripts' prelude (lua/_lib.lua) uses the same."""
# A blocking read must return before the client's socket timeout fires, or it would be
# reported as the store being unavailable.
_BLOCK_MARGIN_MS = 1000
_DEFAULT_SOCKET_TIMEOUT_S = 5.0  # redis-py 8's default when a client sets none
_LIST_PAGE = 200


def _client_of(args: tuple[Any, ...]) -> redis.Redis | None:
    """The client behind a store method (``self``) or a function given a store or a client first."""
    first = args[0] if args else None
    if isinstance(first, StoreBase):
        return first.client
    return first if isinstance(first, redis.Redis) else None


def translate_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Report Redis being unreachable or misconfigured as StoreUnavailable (or RedisMisconfigured),
    in one line that says what to fix, so callers need not know redis-py.

    Connection errors, timeouts and read-only replicas always translate; other redis-py errors
    only when connection_errors recognises them (a wrong DB number, not a Redis server...).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except redis_errors.RedisError as exc:
            client = _client_of(args)
            translated = connection_errors.translate(exc, connection_errors.endpoint_of(client), client)
            if translated is None:
                raise
            raise translated from exc

    return wrapper


def _not_found(run_id: str) -> errors.RunNotFound:
    return errors.RunNotFound(f"no run {run_id}: it never existed, or its retention has passed")


def _digest(inputs_json: str, state_json: str | None) -> str:
    """The request digest of JSON texts (a text that is not JSON is digested as the text itself)."""
    try:
        return request_digest(json.loads(inputs_json), json.loads(state_json) if state_json else None)
    except ValueError:
        return request_digest(inputs_json, state_json)


def _guess(ctx: AttemptContext) -> str:
    """The scoped idempotency key of the attempt's run (right for a keyed run; harmless otherwise)."""
    return keys.idem_scope(ctx.graph, ctx.idempotency_key)


def _idem_guess(graph: str, idempotency_key: str | None, run_id: str) -> str:
    return keys.idem_scope(graph, idempotency_key) if idempotency_key else run_id


def _fenced(ctx: AttemptContext, what: str) -> errors.FencedOut:
    return errors.FencedOut(
        f"attempt {ctx.attempt} of run {ctx.run_id} no longer owns the run (superseded, reaped or "
        f"cancelled); its {what} was not written"
    )


class StoreBase:
    """The client, the registered scripts and the per-run script call every part of the store uses.

    Tokens passed to ``claim`` must be unique per attempt (a fresh uuid4): a claim with the token
    that already owns the run is taken for a retried call and answered ``claimed``.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        run_retention_s: int = DEFAULT_RUN_RETENTION_S,
        dead_retention_s: int = DEFAULT_DEAD_RETENTION_S,
        max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS,
        checkpoint_history: int = DEFAULT_CHECKPOINT_HISTORY,
    ) -> None:
        self._r = client
        self.run_retention_s = int(run_retention_s)
        self.dead_retention_s = int(dead_retention_s)
        self.max_interruptions = int(max_interruptions)
        self.checkpoint_history = int(checkpoint_history)
        """How many checkpoints before the latest a run keeps (REFLEXR_CHECKPOINT_HISTORY)."""
        self._scripts = Scripts(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        run_retention_s: int = DEFAULT_RUN_RETENTION_S,
        dead_retention_s: int = DEFAULT_DEAD_RETENTION_S,
        max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS,
        checkpoint_history: int = DEFAULT_CHECKPOINT_HISTORY,
        socket_timeout: float = 10.0,
        socket_connect_timeout: float = 5.0,
        health_check_interval: int = 15,
        **client_kw: Any,
    ) -> Self:
        """A store on ``redis://`` or ``rediss://`` (TLS) URL; a password in the URL is used for AUTH.

        Timeouts keep a dead server from hanging a worker; the health check replaces
        connections that a NAT or proxy silently dropped while idle. A TLS handshake counts
        as connecting (``store/tls.py``).
        """
        if url.startswith("rediss://"):
            client_kw.setdefault("connection_class", HandshakeBoundSSLConnection)
        client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_connect_timeout,
            health_check_interval=health_check_interval,
            **client_kw,
        )
        return cls(
            client,
            run_retention_s=run_retention_s,
            dead_retention_s=dead_retention_s,
            max_interruptions=max_interruptions,
            checkpoint_history=checkpoint_history,
        )

    @property
    def client(self) -> redis.Redis:
        return self._r

    def close(self) -> None:
        self._r.close()

    @translate_errors
    def ping(self) -> None:
        """One round trip to Redis; StoreUnavailable when it does not answer."""
        self._r.ping()

    @translate_errors
    def preload_scripts(self) -> None:
        """Load every script into Redis now, so no first call pays the NOSCRIPT round trip."""
        self._scripts.preload()

    # -- script plumbing ---------------------------------------------------------------------

    def _run(
        self,
        name: str,
        run_id: str,
        idem_guess: str,
        now: int,
        args: Sequence[ScriptArg],
        extra_keys: Sequence[str] = (),
    ) -> Any:
        """Call a per-run script; if it names the run's real idempotency key, call it again with that."""
        for _ in range(_IDEM_ROUNDS):
            script_keys = [*keys.script_keys(run_id, idem_guess), *extra_keys]
            reply = self._scripts(name, script_keys, [run_id, now, idem_guess, *args])
            if not (isinstance(reply, list) and len(reply) == 2 and text(reply[0]) == "idem"):
                return reply
            idem_guess = text(reply[1])
        raise errors.OperationRefused(f"run {run_id} kept changing during {name}; try again")

    def _kept_seqs(self, run_id: str) -> list[int]:
        """The seqs of the checkpoints a run keeps, oldest first: its history's, then the latest's."""
        pipe = self._r.pipeline(transaction=True)
        pipe.zrange(keys.history(run_id), 0, -1, withscores=True)
        pipe.hget(keys.ckpt(run_id), "seq")
        history, latest = pipe.execute()
        seqs = [int(score) for _, score in history]
        return [*seqs, int(text(latest))] if latest is not None else seqs

    def _no_checkpoint(self, run_id: str, seq: int) -> errors.CheckpointNotFound:
        return errors.CheckpointNotFound(run_id=run_id, seq=seq, kept=self._kept_seqs(run_id))

    def _snapshot(self, run_id: str, reply: list[Any], refusal: str) -> RunInfo:
        outcome = text(reply[0])
        if outcome == "missing":
            raise _not_found(run_id)
        if outcome == "refused":
            status = text(reply[1])
            raise errors.OperationRefused(f"run {run_id} is {status}; {refusal}", status=status)
        return run_info(pairs_to_map(reply[1:]))
