"""RedisStore: runs, checkpoints, leases, run events and the dead-letter index in Redis.

Every change that touches more than one key is one Lua script (``lua/``), so a crash or a
concurrent caller never sees half a transition. Every "now" comes from ``clock.now_ms()``
and is passed to the scripts, which never read the server's clock. Redis being unreachable
is always reported as ``errors.StoreUnavailable``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import redis
from redis import exceptions as redis_errors

from reflexr_graph import clock, errors
from reflexr_graph.core.port import NO_SKIPS, AttemptContext, Skipped
from reflexr_graph.model import RunInfo, Status
from reflexr_graph.store import connection_errors, keys
from reflexr_graph.store.records import (
    Claim,
    ClaimOutcome,
    RunEvent,
    WorkerInfo,
    pairs_to_map,
    request_digest,
    run_event,
    run_info,
    text,
    text_map,
)
from reflexr_graph.store.scripts import Scripts
from reflexr_graph.store.tls import HandshakeBoundSSLConnection

P = ParamSpec("P")
R = TypeVar("R")

ScriptArg = str | int | float

DEFAULT_RUN_RETENTION_S = 7 * 86400
DEFAULT_DEAD_RETENTION_S = 30 * 86400
DEFAULT_MAX_INTERRUPTIONS = 20

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
    if isinstance(first, RedisStore):
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


_translate_errors = translate_errors
"""The store's methods use this name; other modules (schemas.py) use the public one."""


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


class RedisStore:
    """The Redis adapter of ``core.port.CheckpointPort``, plus everything the fleet and surfaces need.

    Tokens passed to :meth:`claim` must be unique per attempt (a fresh uuid4): a claim with
    the token that already owns the run is taken for a retried call and answered ``claimed``.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        run_retention_s: int = DEFAULT_RUN_RETENTION_S,
        dead_retention_s: int = DEFAULT_DEAD_RETENTION_S,
        max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS,
    ) -> None:
        self._r = client
        self.run_retention_s = int(run_retention_s)
        self.dead_retention_s = int(dead_retention_s)
        self.max_interruptions = int(max_interruptions)
        self._scripts = Scripts(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        run_retention_s: int = DEFAULT_RUN_RETENTION_S,
        dead_retention_s: int = DEFAULT_DEAD_RETENTION_S,
        max_interruptions: int = DEFAULT_MAX_INTERRUPTIONS,
        socket_timeout: float = 10.0,
        socket_connect_timeout: float = 5.0,
        health_check_interval: int = 15,
        **client_kw: Any,
    ) -> RedisStore:
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
        )

    @property
    def client(self) -> redis.Redis:
        return self._r

    def close(self) -> None:
        self._r.close()

    @_translate_errors
    def ping(self) -> None:
        """One round trip to Redis; StoreUnavailable when it does not answer."""
        self._r.ping()

    @_translate_errors
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

    def _snapshot(self, run_id: str, reply: list[Any], refusal: str) -> RunInfo:
        outcome = text(reply[0])
        if outcome == "missing":
            raise _not_found(run_id)
        if outcome == "refused":
            raise errors.OperationRefused(f"run {run_id} is {text(reply[1])}; {refusal}")
        return run_info(pairs_to_map(reply[1:]))

    # -- lifecycle ---------------------------------------------------------------------------

    @_translate_errors
    def create_run(
        self,
        run_id: str,
        *,
        graph: str,
        inputs_json: str,
        state_json: str | None = None,
        idempotency_key: str | None = None,
        max_attempts: int,
        dispatch_grace_ms: int,
        trace_context: str = "",
    ) -> tuple[str, bool]:
        """Create a queued run; returns ``(run_id, True)``, or ``(existing_id, False)`` if it exists.

        With ``idempotency_key``, a live run of the same graph created with the same key is
        returned instead, decided inside the script so concurrent callers create one run; if
        that run was made from other inputs or state, IdempotencyConflict names it. The run is
        also put in ``rg:due`` at now + ``dispatch_grace_ms``: if the caller dies before sending
        the Celery message, the reaper sends it. ``trace_context`` (W3C headers as JSON) is the
        trace every attempt of the run joins.
        """
        now = clock.now_ms()
        digest = _digest(inputs_json, state_json) if idempotency_key else ""
        expected = ""
        for _ in range(_IDEM_ROUNDS):
            args: list[ScriptArg] = [
                graph,
                inputs_json,
                state_json or "",
                idempotency_key or "",
                max_attempts,
                now + dispatch_grace_ms,
                expected,
                trace_context,
                digest,
            ]
            owner_key = keys.run(expected or run_id)
            guess = _idem_guess(graph, idempotency_key, run_id)
            reply = self._run("create_run", run_id, guess, now, args, [owner_key])
            outcome, found = text(reply[0]), text(reply[1])
            if outcome == "conflict":
                assert idempotency_key is not None
                raise errors.IdempotencyConflict(graph=graph, idempotency_key=idempotency_key, run_id=found)
            if outcome != "retry":
                return found, outcome == "created"
            expected = found  # another caller took the key since; check the run it names
        raise errors.OperationRefused(f"idempotency key of run {run_id} kept changing hands; try again")

    @_translate_errors
    def claim(
        self,
        run_id: str,
        token: str,
        *,
        lease_ttl_ms: int,
        graph: str = "",
        idempotency_key: str | None = None,
        worker: str = "",
    ) -> Claim:
        """Start an attempt under ``token``; see :class:`ClaimOutcome` for what can happen.

        ``graph`` and ``idempotency_key`` are only a hint that saves a round trip when the run
        is dead-lettered here; the run's own key is used either way. ``worker`` names the
        claiming worker on the ``attempt_started`` event, so operators see where each
        attempt ran.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [token, now + lease_ttl_ms, self.dead_retention_s, worker]
        guess = _idem_guess(graph, idempotency_key, run_id)
        reply = [text(v) for v in self._run("claim", run_id, guess, now, args)]
        outcome = ClaimOutcome(reply[0])
        if outcome is ClaimOutcome.MISSING:
            return Claim(outcome, run_id, token)
        status, number, counted, resumes, graph, inputs, state, idem, max_attempts, trace, checkpoint = reply[
            1:
        ]
        return Claim(
            outcome=outcome,
            run_id=run_id,
            token=token,
            status=status,
            attempt=int(number or 0),
            counted=int(counted or 0),
            resume_seq=int(resumes or 0),
            graph=graph,
            inputs_json=inputs,
            state_json=state or None,
            idempotency_key=idem,
            max_attempts=int(max_attempts or 0),
            trace_context=trace,
            checkpoint=checkpoint or None,
        )

    @_translate_errors
    def renew_lease(self, run_id: str, token: str, *, lease_ttl_ms: int) -> bool:
        """Extend the lease; False when ``token`` lost the run (superseded, reaped or cancelled)."""
        now = clock.now_ms()
        return bool(self._run("renew_lease", run_id, run_id, now, [token, now + lease_ttl_ms]))

    @_translate_errors
    def load_checkpoint(self, run_id: str) -> str | None:
        data = self._r.hget(keys.ckpt(run_id), "data")
        return None if data is None else text(data)

    @_translate_errors
    def save_checkpoint(
        self,
        ctx: AttemptContext,
        payload: str,
        *,
        seq: int,
        next_node: str | None,
        skipped: Skipped = NO_SKIPS,
    ) -> None:
        """Replace the checkpoint, fenced by ``ctx.token``: one EVALSHA, one round trip.

        It runs at every step boundary, so its script takes only the four keys it touches
        rather than the per-run prelude's fifteen. ``skipped`` (boundaries the attempt could
        not save since its last write) is recorded in the same call.
        """
        run_id = ctx.run_id
        script_keys = [
            keys.run(run_id),
            keys.ckpt(run_id),
            keys.events(run_id),
            keys.status_set(Status.RUNNING),
        ]
        args: list[ScriptArg] = [
            run_id,
            clock.now_ms(),
            ctx.token,
            payload,
            seq,
            next_node or "",
            EVENTS_MAXLEN,
            skipped.count,
            skipped.kinds,
        ]
        if not self._scripts("save_checkpoint", script_keys, args):
            raise _fenced(ctx, "checkpoint")

    @_translate_errors
    def succeed(
        self,
        ctx: AttemptContext,
        output_json: str,
        *,
        checkpoint: str = "",
        seq: int = 0,
        skipped: Skipped = NO_SKIPS,
    ) -> None:
        """Record the output and start the retention of every key of the run.

        ``checkpoint`` (with its ``seq``) is the finished checkpoint, written in the same script.
        """
        args: list[ScriptArg] = [
            ctx.token,
            output_json,
            self.run_retention_s,
            checkpoint,
            seq,
            skipped.count,
            skipped.kinds,
        ]
        if not self._run("succeed", ctx.run_id, _guess(ctx), clock.now_ms(), args):
            raise _fenced(ctx, "output")

    @_translate_errors
    def fail(
        self,
        ctx: AttemptContext,
        *,
        error_type: str,
        message: str,
        traceback: str | None,
        reason: str,
        permanent: bool,
        retry_delay_ms: int,
        counted: bool = True,
        skipped: Skipped = NO_SKIPS,
    ) -> str:
        """Record a failed attempt; returns ``'dead'`` or ``'retrying'``.

        ``counted=False`` records an infrastructure failure (Redis unreachable mid-attempt): an
        interruption, bounded by ``max_interruptions``, rather than one of ``max_attempts``.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [
            ctx.token,
            error_type,
            message,
            (traceback or "")[-TRACEBACK_LIMIT:],
            reason,
            "1" if permanent else "0",
            now + retry_delay_ms,
            self.dead_retention_s,
            "1" if counted else "0",
            self.max_interruptions,
            skipped.count,
            skipped.kinds,
        ]
        outcome = text(self._run("fail", ctx.run_id, _guess(ctx), now, args))
        if outcome == "fenced":
            raise _fenced(ctx, "failure")
        return outcome

    @_translate_errors
    def dead_letter(
        self,
        run_id: str,
        *,
        reason: str,
        error_type: str,
        message: str,
        graph: str = "",
        inputs_json: str = "",
        state_json: str | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = 1,
    ) -> bool:
        """Dead-letter a run whose message is bad (unknown graph, invalid inputs), without a claim.

        Creates the record from the message's fields when there is none. Not fenced: the
        message itself is bad, whoever runs it. False when the run is already terminal.
        """
        args: list[ScriptArg] = [
            reason,
            error_type,
            message,
            graph,
            inputs_json,
            state_json or "",
            idempotency_key or "",
            max_attempts,
            self.dead_retention_s,
            _digest(inputs_json, state_json) if idempotency_key else "",
        ]
        guess = _idem_guess(graph, idempotency_key, run_id)
        return bool(self._run("dead_letter", run_id, guess, clock.now_ms(), args))

    @_translate_errors
    def release(self, ctx: AttemptContext) -> str:
        """Give the run back on soft shutdown: retrying, due now; ``'released'``, ``'dead'`` or ``'fenced'``.

        The attempt is an interruption, not one of ``max_attempts``; past ``max_interruptions``
        the run is dead-lettered (``max_interruptions``) so a run cut short forever still ends.
        """
        args: list[ScriptArg] = [ctx.token, self.max_interruptions, self.dead_retention_s]
        outcome = int(self._run("release", ctx.run_id, _guess(ctx), clock.now_ms(), args))
        return {0: "fenced", 1: "released", 2: "dead"}[outcome]

    # -- reaper --------------------------------------------------------------------------------

    @_translate_errors
    def reap(
        self, now_ms: int | None = None, *, limit: int = 100, outage: tuple[int, int] | None = None
    ) -> list[str]:
        """Recover runs whose lease lapsed: each is re-checked and changed by one script call.

        Each counts as a failed ``abandoned`` attempt; the run is dead-lettered when out of
        attempts, else made due now. A lease that lapsed inside ``outage`` (a window, in epoch
        ms, in which the caller found Redis unreachable) was lost to the outage: that attempt
        is an interruption (``store_unavailable``) instead. Returns the ids of the runs recovered.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        lapsed = self._r.zrangebyscore(keys.LEASES, "-inf", now, start=0, num=limit)
        window: list[ScriptArg] = [outage[0], outage[1]] if outage else ["", ""]
        args: list[ScriptArg] = [self.dead_retention_s, *window, self.max_interruptions]
        handled: list[str] = []
        for member in lapsed:
            run_id = text(member)
            outcome = text(self._run("reap", run_id, run_id, now, args))
            if outcome in ("dead", "retrying"):
                handled.append(run_id)
        return handled

    @_translate_errors
    def due(self, now_ms: int | None = None, *, limit: int = 100) -> list[tuple[str, float]]:
        """Runs that need a Celery message sent: ``(run_id, due score)``, earliest first."""
        now = clock.now_ms() if now_ms is None else now_ms
        rows: list[Any] = self._r.zrangebyscore(keys.DUE, "-inf", now, start=0, num=limit, withscores=True)
        return [(text(member), float(score)) for member, score in rows]

    @_translate_errors
    def ack_due(self, run_id: str, score: float) -> bool:
        """Drop the entry after its message was sent, unless it was rescheduled since."""
        return bool(self._scripts("ack_due", [keys.DUE], [run_id, repr(float(score))]))

    @_translate_errors
    def reschedule_due(self, run_id: str, score: float, *, base_ms: int, cap_ms: int) -> int:
        """After sending a due run's message, keep its entry as a safety net, later; the wait in ms or 0.

        A worker SIGKILLed after prefetching the message but before claiming the run takes
        the message with it until the broker's visibility timeout; the entry brings the run
        back sooner. The wait doubles with each send (``base_ms``, twice that, ... up to
        ``cap_ms``), and the claim removes the entry and resets the count.
        """
        args: list[ScriptArg] = [run_id, score, clock.now_ms(), base_ms, cap_ms]
        return int(self._scripts("reschedule_due", [keys.DUE, keys.run(run_id)], args))

    @_translate_errors
    def bump_due(self, run_id: str, delay_ms: int) -> bool:
        """Move an existing due entry to now + ``delay_ms`` (sending its message failed)."""
        changed = self._r.zadd(keys.DUE, {run_id: clock.now_ms() + delay_ms}, xx=True, ch=True)
        return bool(changed)

    @_translate_errors
    def prune(self, now_ms: int | None = None, *, limit: int = 1000) -> int:
        """Drop index entries of terminal runs whose keys expired; returns how many were dropped.

        Redis expires the per-run keys but not their entries in the global indexes.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        retention_s = {Status.SUCCEEDED: self.run_retention_s, Status.CANCELLED: self.run_retention_s}
        retention_s[Status.DEAD] = self.dead_retention_s
        pruned = 0
        for status, seconds in retention_s.items():
            old = self._r.zrangebyscore(keys.status_set(status), "-inf", now - seconds * 1000, 0, limit)
            for member in old:
                run_id = text(member)
                pruned += int(self._run("prune", run_id, run_id, now, []))
        return pruned

    # -- operator actions ----------------------------------------------------------------------

    @_translate_errors
    def cancel(self, run_id: str) -> RunInfo:
        """Cancel an active run; its running attempt is fenced out (renew_lease turns False)."""
        reply = self._run("cancel", run_id, run_id, clock.now_ms(), [self.run_retention_s])
        return self._snapshot(run_id, reply, "only queued, running or retrying runs can be cancelled")

    @_translate_errors
    def replay(self, run_id: str, *, from_start: bool = False) -> RunInfo:
        """Queue a dead or cancelled run again with a fresh attempt budget; the caller sends the message.

        The checkpoint is kept, so the run resumes where it stopped, unless ``from_start``.
        """
        args: list[ScriptArg] = ["1" if from_start else "0"]
        reply = self._run("replay", run_id, run_id, clock.now_ms(), args)
        return self._snapshot(run_id, reply, "only dead or cancelled runs replay")

    @_translate_errors
    def purge(self, run_id: str) -> bool:
        """Delete a dead or cancelled run and its index entries; False when there is no such run."""
        reply = self._run("purge", run_id, run_id, clock.now_ms(), [])
        outcome = text(reply[0])
        if outcome == "refused":
            raise errors.OperationRefused(
                f"run {run_id} is {text(reply[1])}; only dead or cancelled runs can be purged"
            )
        return outcome == "ok"

    # -- reads -----------------------------------------------------------------------------------

    @_translate_errors
    def get(self, run_id: str) -> RunInfo:
        record = text_map(self._r.hgetall(keys.run(run_id)))
        if not record:
            raise _not_found(run_id)
        return run_info(record)

    @_translate_errors
    def trace_context(self, run_id: str) -> str:
        """The W3C trace context recorded when the run was enqueued (JSON), or '' without one."""
        return text(self._r.hget(keys.run(run_id), "trace"))

    @_translate_errors
    def graphs_of(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """:meth:`graph_of` for many runs, in one round trip."""
        pipe = self._r.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(keys.run(run_id), "graph")
        replies = pipe.execute() if run_ids else []
        return {run_id: (text(g) or None) for run_id, g in zip(run_ids, replies, strict=True)}

    @_translate_errors
    def graph_of(self, run_id: str) -> str | None:
        """The graph a run belongs to, which its message names; None once the run is gone.

        A message is only a nudge: the worker reads inputs and state from the run record.
        """
        graph = text(self._r.hget(keys.run(run_id), "graph"))
        return graph or None

    @_translate_errors
    def traceback(self, run_id: str) -> str | None:
        """The last failed attempt's traceback, if it had one."""
        tb = self._r.get(keys.tb(run_id))
        return None if tb is None else text(tb)

    @_translate_errors
    def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """The latest checkpoint's metadata (``seq``, ``saved_at`` s, ``size`` bytes, ``next_node``)."""
        seq, saved_at, size, next_node = self._r.hmget(
            keys.ckpt(run_id), ["seq", "saved_at", "size", "next_node"]
        )
        if seq is None:
            return None
        return {
            "seq": int(text(seq)),
            "saved_at": int(text(saved_at) or 0) / 1000,
            "size": int(text(size) or 0),
            "next_node": text(next_node) or None,
        }

    @_translate_errors
    def events(
        self, run_id: str, after: str = "0-0", block_ms: int | None = None, *, count: int | None = None
    ) -> list[RunEvent]:
        """Events after stream id ``after``, oldest first.

        With ``block_ms``, waits up to that long (0: forever) for the first new event, with
        XREAD BLOCK: this is how ``wait`` sleeps on a notification instead of polling.
        """
        key = keys.events(run_id)
        found = self._range(key, after, count)
        if found or block_ms is None:
            return found
        return self._read_blocking(key, after, block_ms, count)

    def _range(self, key: str, after: str, count: int | None) -> list[RunEvent]:
        entries: list[Any] = self._r.xrange(key, min=f"({after}", max="+", count=count) or []
        return [run_event(entry_id, fields) for entry_id, fields in entries]

    def _read_blocking(self, key: str, after: str, block_ms: int, count: int | None) -> list[RunEvent]:
        # XREAD BLOCK only as the wake-up: its reply shape differs between RESP2 and RESP3
        # (and redis-py versions), while XRANGE reads the events the same way everywhere.
        chunk_limit = self._max_block_ms()
        remaining = block_ms
        while True:
            chunk = remaining if remaining > 0 else (chunk_limit or 0)
            if chunk_limit is not None:
                chunk = min(chunk, chunk_limit)
            if self._r.xread({key: after}, count=1, block=chunk):
                return self._range(key, after, count)
            if block_ms > 0:
                remaining -= chunk
                if remaining <= 0:
                    return []

    def _max_block_ms(self) -> int | None:
        kw = self._r.connection_pool.connection_kwargs
        # redis-py 8 leaves its default socket timeout out of connection_kwargs; an explicit
        # None (present in kw) means reads never time out.
        if "socket_timeout" in kw:
            timeout = kw["socket_timeout"]
        else:
            timeout = kw.get("orig_socket_timeout", _DEFAULT_SOCKET_TIMEOUT_S)
        if not timeout:
            return None
        timeout_ms = int(float(timeout) * 1000)
        return max(1, timeout_ms - min(_BLOCK_MARGIN_MS, timeout_ms // 2))

    @_translate_errors
    def list_runs(
        self, *, status: Status | str | None = None, graph: str | None = None, limit: int = 50
    ) -> list[RunInfo]:
        """Runs newest first: by update time within a status, else by creation time."""
        index = keys.status_set(status) if status else keys.ALL
        return self._scan_index(index, limit, lambda info: graph is None or info.graph == graph)

    @_translate_errors
    def dead_letters(
        self, *, graph: str | None = None, reason: str | None = None, limit: int = 1000
    ) -> list[RunInfo]:
        """Dead-lettered runs, most recently dead first."""

        def keep(info: RunInfo) -> bool:
            return (graph is None or info.graph == graph) and (reason is None or info.reason == reason)

        return self._scan_index(keys.DEAD, limit, keep)

    def _scan_index(self, index: str, limit: int, keep: Callable[[RunInfo], bool]) -> list[RunInfo]:
        found: list[RunInfo] = []
        start = 0
        while len(found) < limit:
            members = [text(m) for m in self._r.zrevrange(index, start, start + _LIST_PAGE - 1)]
            if not members:
                break
            start += len(members)
            pipe = self._r.pipeline(transaction=False)
            for run_id in members:
                pipe.hgetall(keys.run(run_id))
            for run_id, raw in zip(members, pipe.execute(), strict=True):
                record = text_map(raw)
                if not record:
                    # Its keys expired; drop the stale index entries while we are here.
                    self._run("prune", run_id, run_id, clock.now_ms(), [])
                    continue
                info = run_info(record)
                if keep(info):
                    found.append(info)
        return found[:limit]

    # -- graphs without a live worker -----------------------------------------------------------

    @_translate_errors
    def hold_unserved(self, run_id: str, *, grace_ms: int, recheck_ms: int, message: str) -> str:
        """Keep a due run of a graph no live worker serves; dead-letter it once it waited ``grace_ms``.

        Returns ``'held'`` (looked at again in ``recheck_ms``), ``'dead'`` (``unknown_graph``),
        ``'skip'`` (claimed or finished meanwhile) or ``'gone'``. The wait starts when a run is
        first found unserved and ends at its next claim.
        """
        now = clock.now_ms()
        args: list[ScriptArg] = [grace_ms, now + recheck_ms, self.dead_retention_s, message]
        return text(self._run("hold_unserved", run_id, run_id, now, args))

    # -- live workers ------------------------------------------------------------------------------

    @_translate_errors
    def worker_beat(self, info: WorkerInfo, *, ttl_ms: int) -> None:
        """Record ``info.name`` as live for ``ttl_ms``, serving ``info.graphs`` (one round trip)."""
        script_keys = [keys.WORKERS, keys.worker(info.name), *(keys.served(g) for g in info.graphs)]
        args: list[ScriptArg] = [info.name, clock.now_ms(), ttl_ms, info.model_dump_json()]
        self._scripts("worker_beat", script_keys, args)

    @_translate_errors
    def worker_leave(self, info: WorkerInfo) -> None:
        """Take a stopping worker out of the registry at once."""
        script_keys = [keys.WORKERS, keys.worker(info.name), *(keys.served(g) for g in info.graphs)]
        self._scripts("worker_leave", script_keys, [info.name])

    @_translate_errors
    def live_workers(self) -> list[WorkerInfo]:
        """Every worker whose heartbeat has not expired, by name."""
        names = [text(n) for n in self._r.zrangebyscore(keys.WORKERS, clock.now_ms(), "+inf")]
        if not names:
            return []
        raw = self._r.mget([keys.worker(n) for n in names])
        return sorted(
            (WorkerInfo.model_validate_json(text(r)) for r in raw if r is not None), key=lambda w: w.name
        )

    @_translate_errors
    def serving(self, graphs: Sequence[str]) -> dict[str, list[str]]:
        """For each graph, the names of the live workers that serve it (one round trip)."""
        now = clock.now_ms()
        pipe = self._r.pipeline(transaction=False)
        for graph in graphs:
            pipe.zrangebyscore(keys.served(graph), now, "+inf")
        replies = pipe.execute() if graphs else []
        return {g: sorted(text(n) for n in names) for g, names in zip(graphs, replies, strict=True)}

    # -- reaper lock -----------------------------------------------------------------------------

    @_translate_errors
    def acquire_lock(self, owner: str, ttl_ms: int) -> bool:
        """Take the reaper lock for ``ttl_ms`` if nobody holds it."""
        return bool(self._r.set(keys.REAPER_LOCK, owner, nx=True, px=ttl_ms))

    @_translate_errors
    def extend_lock(self, owner: str, ttl_ms: int) -> bool:
        """Extend the reaper lock; False when ``owner`` no longer holds it."""
        return bool(self._scripts("lock_extend", [keys.REAPER_LOCK], [owner, ttl_ms]))

    @_translate_errors
    def release_lock(self, owner: str) -> bool:
        """Release the reaper lock, only if ``owner`` still holds it."""
        return bool(self._scripts("lock_release", [keys.REAPER_LOCK], [owner]))
