"""The store's executors and what they share: the client, the scripts, error translation, helpers.

:class:`StoreBase` is the blocking executor: it answers the requests of an operation
(``store/ops.py``) with its client and scripts (:meth:`StoreBase.do`, :meth:`StoreBase.handle`),
and holds the clock, ``subscribe``, ``close`` and ``ping``. ``RedisStore`` (redis_store.py) is
it plus one table of the concern modules' operations (an attempt's writes, recovery,
interventions, reads, the worker registry...: ``store/operation.py``); the async store
(``aio.py``) shares :class:`StoreCore`.

Every change that touches more than one key is one Lua script (``lua/``); every "now" comes from
``clock.now_ms()`` and is passed to the scripts. That clock is Redis's own time, which the store
samples (:meth:`StoreBase.sample_clock`) before a process's first call and again every
``clock.RESAMPLE_S``, so a worker whose wall clock is off agrees with the fleet on every lease
and due time. Redis being unreachable is always reported as ``errors.StoreUnavailable``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, Self, TypeVar

import redis
import redis.asyncio
from redis import exceptions as redis_errors

from reflexr_graph import clock, errors
from reflexr_graph.core.port import AttemptContext
from reflexr_graph.store import cluster, connect, connection_errors, keys, sentinel
from reflexr_graph.store.ops import Batch, Command, Eval, Layout, Op, Request, Scan, drive
from reflexr_graph.store.payload_args import STRICT_SCRIPTS, decode_reply, fields_of
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.records import request_digest
from reflexr_graph.store.scripts import Scripts
from reflexr_graph.store.settings import DEFAULT_OPTIONS, StoreOptions

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
C = TypeVar("C", redis.Redis, redis.asyncio.Redis)

CLIENT_DEFAULTS: dict[str, Any] = {
    "socket_timeout": 10.0,
    "socket_connect_timeout": 5.0,
    "health_check_interval": 15,
}
"""Timeouts of a store's Redis client (blocking or async) unless its caller gives others."""

# A blocking read must return before the client's socket timeout fires, or it would be
# reported as the store being unavailable.
_BLOCK_MARGIN_MS = 1000
_DEFAULT_SOCKET_TIMEOUT_S = 5.0  # redis-py 8's default when a client sets none
# Tracebacks of deep recursion can be megabytes; the end holds the frames that matter.
TRACEBACK_LIMIT = 64 * 1024
EVENTS_MAXLEN = 1000
"""Approximate cap of a run's event stream; the per-run scripts' prelude (lua/_lib.lua) uses the same."""


def _client_of(args: tuple[Any, ...]) -> redis.Redis | None:
    """The client behind a store method (``self``) or a function given a store or a client first."""
    first = args[0] if args else None
    if isinstance(first, StoreBase):
        return first.client
    return first if isinstance(first, redis.Redis) or cluster.is_cluster(first) else None


def translate_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Report Redis being unreachable or misconfigured as StoreUnavailable (or RedisMisconfigured),
    in one line that says what to fix, so callers need not know redis-py.

    Connection errors, timeouts and read-only replicas always translate; other redis-py errors
    only when connection_errors recognises them (a wrong DB number, not a Redis server...).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if args and isinstance(args[0], StoreBase):
            args[0].keep_clock()  # a store method may compare times: on the store's clock
        try:
            return fn(*args, **kwargs)
        except redis_errors.RedisError as exc:
            client = _client_of(args)
            translated = connection_errors.translate(exc, connection_errors.endpoint_of(client), client)
            if translated is None:
                raise
            raise translated from exc

    return wrapper


def max_block_ms(connection_kwargs: dict[str, Any]) -> int | None:
    """The longest XREAD BLOCK a client with these connection settings survives (None: any)."""
    # redis-py 8 leaves its default socket timeout out of connection_kwargs; an explicit
    # None (present in kw) means reads never time out.
    if "socket_timeout" in connection_kwargs:
        timeout = connection_kwargs["socket_timeout"]
    else:
        timeout = connection_kwargs.get("orig_socket_timeout", _DEFAULT_SOCKET_TIMEOUT_S)
    if not timeout:
        return None
    timeout_ms = int(float(timeout) * 1000)
    return max(1, timeout_ms - min(_BLOCK_MARGIN_MS, timeout_ms // 2))


def time_reply_ms(reply: Any) -> float:
    """Redis's reply to TIME, ``[seconds, microseconds]`` (as numbers or text), in epoch ms."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) / 1000


def _digest(inputs_json: str, state_json: str | None) -> str:
    """The request digest of JSON texts (a text that is not JSON is digested as the text itself)."""
    try:
        return request_digest(json.loads(inputs_json), json.loads(state_json) if state_json else None)
    except ValueError:
        return request_digest(inputs_json, state_json)


def _guess(ctx: AttemptContext) -> str:
    """The scoped idempotency key of the attempt's run, or its id for a run without one (whose
    ``idempotency_key`` is its id): the id keeps the call in the run's shard (store/keys.py)."""
    if ctx.idempotency_key == ctx.run_id:
        return ctx.run_id
    return keys.idem_scope(ctx.graph, ctx.idempotency_key)


def _idem_guess(graph: str, idempotency_key: str | None, run_id: str) -> str:
    return keys.idem_scope(graph, idempotency_key) if idempotency_key else run_id


def _fenced(ctx: AttemptContext, what: str) -> errors.FencedOut:
    return errors.FencedOut(
        f"attempt {ctx.attempt} of run {ctx.run_id} no longer owns the run (superseded, reaped or "
        f"cancelled); its {what} was not written"
    )


def run_of_request(request: Command | Eval) -> str:
    """The run a request reads, '' for none: its payloads are decoded as that run's (the associated
    data of an encrypted one binds it, store/payload_codec.py), and named so in messages."""
    first = request.keys[0] if isinstance(request, Eval) and request.keys else None
    if isinstance(request, Command):
        first = request.args[0] if request.args else None
        if isinstance(first, dict):  # XREAD's streams, a run's first
            first = next(iter(first), None)
    return keys.run_of(first) if first is not None else ""


def decode_batch(codec: PayloadCodec, request: Batch, replies: list[Any]) -> list[Any]:
    """A pipeline's replies with their payloads decoded, each as its own command's or script's."""
    return [
        decode_reply(
            codec,
            reply,
            run_of_request(command),
            strict=codec.strict and isinstance(command, Eval) and command.name in STRICT_SCRIPTS,
            fields=fields_of(command),
        )
        if isinstance(command, Eval) or command.decoded
        else reply
        for command, reply in zip(request.commands, replies, strict=True)
    ]


class StoreCore(Generic[C]):
    """What both stores are built from, the blocking one (:class:`StoreBase`) and the async one
    (``store/aio.py``): the client, how its indexes are sharded, its options (retention, bounds, the
    payload codec: store/settings.py) and the registered scripts."""

    def __init__(self, client: C, *, options: StoreOptions = DEFAULT_OPTIONS) -> None:
        self._r: C = client
        self.shards = cluster.shards(client)
        """How the store's indexes are sharded: by its kind, standalone or cluster (keys.Shards)."""
        self.options = options
        """What the store was built with (store/settings.py), as its operations read it: a test that
        replaces it (``dataclasses.replace``) for a shorter history changes the next operation's."""
        self.codec = options.codec
        """How payloads are kept at rest (store/payload_codec.py): compressed, encrypted, offloaded.
        The options' codec when the store was built: its requests and scripts encode with it."""
        # An async client's register_script gives scripts whose call is awaited, with the same
        # keys/args and the same NOSCRIPT fallback as the blocking ones.
        self._scripts = Scripts(client, self.codec)

    @property
    def client(self) -> C:
        return self._r

    @property
    def max_block_ms(self) -> int | None:
        """The longest XREAD BLOCK this store's client survives (None: any), for a blocking read."""
        return max_block_ms(cluster.connection_kwargs(self._r))


class StoreBase(StoreCore[redis.Redis]):
    """The client, the registered scripts and the per-run script call every part of the store uses.

    Tokens passed to ``claim`` must be unique per attempt (a fresh uuid4): a claim with the token
    that already owns the run is taken for a retried call and answered ``claimed``.
    """

    def __init__(self, client: redis.Redis, *, options: StoreOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(client, options=options)
        self._indexed_limits: dict[str, str] = {}
        """Limit key -> configuration this process wrote to the control slot's index (store/limits.py:
        index_limit, by ``RedisStore.acquire_limit``)."""

    @classmethod
    def from_url(cls, url: str, *, options: StoreOptions = DEFAULT_OPTIONS, **client_kw: Any) -> Self:
        """A store on a ``redis://``, ``rediss://`` (TLS) or ``redis+sentinel://`` URL (store/sentinel.py);
        a password in the URL is used for AUTH. ``client_kw`` are redis-py's client options.

        Timeouts keep a dead server from hanging a worker; the health check replaces
        connections that a NAT or proxy silently dropped while idle. A TLS handshake counts
        as connecting (``store/tls.py``).
        """
        client = connect.blocking_client(url, **{**CLIENT_DEFAULTS, **client_kw})
        return cls(client, options=options)

    @property
    def scripts(self) -> Scripts:
        """The registered scripts (the attempt's hot path sends their EVALSHAs itself: store/hot_path.py)."""
        return self._scripts

    def close(self) -> None:
        self._r.close()
        sentinel.close_sentinels(self._r)

    @translate_errors
    def ping(self) -> None:
        """One round trip to Redis; StoreUnavailable when it does not answer."""
        self._r.ping()

    def sample_clock(self) -> clock.Sample | None:
        """Read Redis's time (one TIME) into this process's clock (``clock.py``); None when Redis did
        not answer: the clock keeps its last sample (or the wall clock) and tries again later.

        On a Redis Cluster redis-py sends TIME to its default node: one shard's time serves for all,
        as a cluster's nodes keep theirs by NTP, far closer than a lease's margins.
        """
        started = clock.probe()
        try:
            reply = self._r.time()
        except (redis_errors.RedisError, redis_errors.RedisClusterException):
            return None  # the call that follows says what is wrong
        return started.record(time_reply_ms(reply))

    def keep_clock(self) -> None:
        """Sample Redis's time if this process never has or its sample is due (``clock.due``)."""
        if clock.due():
            self.sample_clock()

    @translate_errors
    def preload_scripts(self) -> None:
        """Load every script into Redis now, so no first call pays the NOSCRIPT round trip."""
        self._scripts.preload()

    @translate_errors
    def subscribe(self, *channels: str) -> redis.client.PubSub:
        """A subscription to ``channels``, subscribed now, that leaves out the confirmations. It is
        no request and reply, so no operation: the caller reads its messages as they come."""
        pubsub: redis.client.PubSub = self._r.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(*channels)
        return pubsub

    # -- operations (store/ops.py) -----------------------------------------------------------

    @translate_errors
    def handle(self, request: Request) -> Any:
        """Answer one request of an operation with this store's blocking client; Redis errors
        arrive as StoreUnavailable. Payloads in the reply come back decoded (store/payload_args.py)."""
        return self.answer(request)

    def answer(self, request: Request) -> Any:
        """:meth:`handle`'s answer, with redis-py's errors as they are (for a caller inside kombu
        or Celery, which reconnect on those: store/quarantine.py)."""
        if isinstance(request, Command):
            reply = getattr(self._r, request.method)(*request.args, **request.kwargs)
            if not request.decoded:
                return reply
            return decode_reply(self.codec, reply, run_of_request(request), fields=fields_of(request))
        if isinstance(request, Eval):
            reply = self._scripts(request.name, request.keys, request.args)
            strict = self.codec.strict and request.name in STRICT_SCRIPTS
            run_id, read = run_of_request(request), fields_of(request)
            return decode_reply(self.codec, reply, run_id, strict=strict, fields=read)
        if isinstance(request, Layout):
            return self.shards
        if isinstance(request, Batch):
            return self._answer_batch(request)
        if isinstance(request, Scan):
            return cluster.scan_page(self._r, request)
        raise TypeError(f"the store cannot answer a {type(request).__name__} request")

    def _answer_batch(self, request: Batch) -> list[Any]:
        if len(request.commands) == 1 and isinstance(request.commands[0], Eval):
            return [self.answer(request.commands[0])]  # no SCRIPT EXISTS first (ops.Batch)
        replies = self._scripts.pipelined(request.commands, transaction=request.transaction)
        return decode_batch(self.codec, request, replies)

    def do(self, op: Op[T]) -> T:
        """Run an operation against this store; Redis errors arrive as StoreUnavailable."""
        self.keep_clock()  # before the operation reads the clock
        return drive(op, self.handle)
