"""The store's operations on ``redis.asyncio``: what the native ``AsyncClient`` runs them with.

The operations themselves (``store/ops.py``, ``reads.py``, ``interventions.py``...) are the blocking
store's; only the answering of their requests is asynchronous here, so a blocking read (XREAD
BLOCK) waits on a socket of the event loop rather than in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Self, TypeVar

import redis.asyncio
from redis import exceptions as redis_errors

from reflexr_graph import clock
from reflexr_graph.store import cluster, connect, connection_errors, sentinel
from reflexr_graph.store.base import (
    CLIENT_DEFAULTS,
    StoreCore,
    decode_batch,
    run_of_request,
    time_reply_ms,
)
from reflexr_graph.store.ops import Batch, Command, Eval, Layout, Op, Request, drive_async
from reflexr_graph.store.payload_args import STRICT_SCRIPTS, Fields, decode_reply, encode_args, fields_of
from reflexr_graph.store.settings import DEFAULT_OPTIONS, StoreOptions

T = TypeVar("T")

MAX_CONNECTIONS = 1024
"""Connections one async store may open. Each blocked ``wait`` or event stream holds one for as
long as it waits (redis.asyncio's default of 100 would refuse the 101st), and Redis allows
10,000 clients by default."""


class AsyncStore(StoreCore[redis.asyncio.Redis]):
    """An async Redis client, its registered scripts, and the settings operations take."""

    @classmethod
    def from_url(cls, url: str, *, options: StoreOptions = DEFAULT_OPTIONS, **client_kw: Any) -> Self:
        """A store on a ``redis://``, ``rediss://`` or ``redis+sentinel://`` URL, with the blocking
        store's timeouts; ``client_kw`` are redis.asyncio's client options."""
        client = connect.async_client(
            url, **{**CLIENT_DEFAULTS, "max_connections": MAX_CONNECTIONS, **client_kw}
        )
        return cls(client, options=options)

    async def handle(self, request: Request) -> Any:
        """Answer one request of an operation; Redis errors arrive as StoreUnavailable."""
        try:
            return await self._answer(request)
        except redis_errors.RedisError as exc:
            at = connection_errors.Endpoint.of_client(self._r)
            # The translation may probe the server (does it speak TLS?) with blocking sockets:
            # only on this failure path, and off the loop so other requests go on meanwhile.
            memory = await self._memory() if isinstance(exc, redis_errors.OutOfMemoryError) else None
            translated = await asyncio.to_thread(connection_errors.translate, exc, at, None, memory)
            if translated is None:
                raise
            raise translated from exc

    async def _memory(self) -> dict[str, Any] | None:
        """The server's ``INFO memory``, for the message of a full Redis; None if it will not say."""
        if cluster.is_cluster(self._r):  # no one server's maxmemory
            return None
        try:
            return dict(await self._r.info("memory"))
        except (redis_errors.RedisError, OSError):
            return None

    async def _answer(self, request: Request) -> Any:
        # Payloads in a reply come back decoded, as the blocking store's (store/payload_args.py).
        if isinstance(request, Command):
            reply = await getattr(self._r, request.method)(*request.args, **request.kwargs)
            if not request.decoded:
                return reply
            return await self._decoded(reply, run_of_request(request), fields=fields_of(request))
        if isinstance(request, Eval):
            args = await self._off_loop(encode_args, self.codec, request.name, request.args, request.keys)
            reply = await self._scripts.call_encoded(request.name, request.keys, args)
            strict = self.codec.strict and request.name in STRICT_SCRIPTS
            return await self._decoded(reply, run_of_request(request), strict, fields_of(request))
        if isinstance(request, Layout):
            return self.shards
        if isinstance(request, Batch):
            if len(request.commands) == 1 and isinstance(request.commands[0], Eval):
                return [await self._answer(request.commands[0])]  # no SCRIPT EXISTS first (ops.Batch)
            replies = await self._pipelined(request)
            return await self._off_loop(decode_batch, self.codec, request, replies)
        raise TypeError(f"the store cannot answer a {type(request).__name__} request")

    async def _pipelined(self, request: Batch) -> list[Any]:
        """A batch's replies: one pipeline, each script call in it the plain EVALSHA of its encoded
        arguments; a script the server lost is loaded, with every other, and the batch sent again
        once, as the blocking store's (Scripts.pipelined)."""
        sent: list[tuple[Command | Eval, Any]] = []
        for command in request.commands:
            if isinstance(command, Eval):
                encoded = await self._off_loop(
                    encode_args, self.codec, command.name, command.args, command.keys
                )
                sent.append((command, encoded))
            else:
                sent.append((command, None))
        for tried in (False, True):
            async with self._r.pipeline(transaction=request.transaction) as pipe:
                for command, encoded in sent:
                    if isinstance(command, Eval):
                        pipe.evalsha(
                            self._scripts.sha(command.name), len(command.keys), *command.keys, *encoded
                        )
                    else:
                        getattr(pipe, command.method)(*command.args, **command.kwargs)
                try:
                    return list(await pipe.execute())
                except redis_errors.NoScriptError:
                    if tried:
                        raise
            await self._scripts.preload_async()
        raise AssertionError("unreachable")

    async def _decoded(
        self, reply: Any, run_id: str, strict: bool = False, fields: Fields | None = None
    ) -> Any:
        return await self._off_loop(
            lambda: decode_reply(self.codec, reply, run_id, strict=strict, fields=fields)
        )

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, in a thread when a payload store is set: a read or write of an offloaded
        payload (a file on a shared volume, an S3 object) must not block the event loop."""
        if self.codec.blobs is None:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    async def do(self, op: Op[T]) -> T:
        """Run an operation against this store."""
        await self.keep_clock()  # before the operation reads the clock
        return await drive_async(op, self.handle)

    async def sample_clock(self) -> clock.Sample | None:
        """Read Redis's time into this process's clock, as the blocking store's ``sample_clock``."""
        started = clock.probe()
        try:
            reply = await self._r.time()
        except (redis_errors.RedisError, redis_errors.RedisClusterException):
            return None  # the call that follows says what is wrong
        return started.record(time_reply_ms(reply))

    async def keep_clock(self) -> None:
        """Sample Redis's time if this process never has or its sample is due (``clock.due``)."""
        if clock.due():
            await self.sample_clock()

    async def ping(self) -> None:
        """One round trip to Redis; StoreUnavailable when it does not answer."""
        await self.handle(Command("ping"))

    async def close(self) -> None:
        await self._r.aclose()
        await sentinel.aclose_sentinels(self._r)
