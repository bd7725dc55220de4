"""The native asyncio client: the :class:`~reflexr_graph.client.sync.Client` API on ``redis.asyncio``.

Every call runs the same operations as ``Client`` (``client/core.py`` and the store's), answered
on the event loop: ``wait`` and ``events`` block in XREAD BLOCK on a socket of the loop, so a
hundred concurrent waits hold a hundred Redis connections and no thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self, TypeVar

from celery import Celery

from reflexr_graph.client.failover import READ, Repeat, call_async
from reflexr_graph.client.operation import AsyncFacade
from reflexr_graph.client.operations import Operations
from reflexr_graph.client.publish import MessageSender
from reflexr_graph.client.streaming import StreamCursor
from reflexr_graph.config.settings import Settings
from reflexr_graph.model import StreamItem
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.ops import Envelope, Op, Publish, Request, drive_async

T = TypeVar("T")


class AsyncClient(AsyncFacade, Operations):
    """Enqueue and manage runs from asyncio code; the same methods and arguments as ``Client``.

    Its methods are the operation table's (``client/operations.py``), awaited: :meth:`_do` runs
    them on the event loop.
    """

    def __init__(
        self,
        settings: Settings,
        store: AsyncStore | None = None,
        *,
        max_connections: int | None = None,
        by: str = "client",
    ) -> None:
        """``max_connections`` bounds the store's pool (store/aio.py's MAX_CONNECTIONS otherwise);
        ``by`` is who the client acts as (see ``ClientBase.by``)."""
        super().__init__(settings, by)
        bound = {"max_connections": max_connections} if max_connections else {}
        self.store: AsyncStore = store or AsyncStore.from_url(
            settings.redis_url, options=self.store_options, **bound
        )
        self._sender = MessageSender(settings)

    @property
    def app(self) -> Celery:
        """The producer Celery app the messages are built with."""
        return self._sender.app

    async def _handle(self, request: Request) -> Any:
        if isinstance(request, Publish):
            return await self._sender.send(self.store, request.run_id, request.graph, request.priority)
        if isinstance(request, Envelope):
            return self._sender.message(request.run_id, request.graph, request.priority)
        return await self.store.handle(request)

    async def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        await self.store.keep_clock()  # the operation's times are the store's (clock.py)
        # Each request is retried while Redis is unavailable, as ``repeat`` allows (client/failover.py).
        return await drive_async(
            op, lambda request: call_async(self._failover, self._handle, request, repeat)
        )

    async def close(self) -> None:
        """Release the Redis connections."""
        self._sender.close()
        await self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def stream(
        self,
        run_id: str,
        *,
        topic: str | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[StreamItem]:
        """See :meth:`Client.stream`: an async iterator, which waits on the loop, holding no thread."""
        cursor = StreamCursor.start(run_id, topic, after, timeout, self.store.max_block_ms)
        while not cursor.done:
            for item in cursor.take(await self._do(cursor.read())):
                yield item
