"""The Python client: enqueue runs, read them, wait for them, and act on dead letters.

The client talks to the same Redis as the fleet: the store for run records, and the
broker for the ``reflexr_graph.run`` Celery messages. It never imports a graph's code;
inputs are validated against the JSON Schema a worker published (``schemas.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Self, TypeVar

from celery import Celery

from reflexr_graph.client.failover import READ, Repeat, call
from reflexr_graph.client.operation import SyncFacade
from reflexr_graph.client.operations import Operations
from reflexr_graph.client.publish import queued_message
from reflexr_graph.client.streaming import StreamCursor
from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.config.settings import Settings
from reflexr_graph.model import StreamItem
from reflexr_graph.store.ops import Envelope, Op, Publish, Request, drive
from reflexr_graph.store.redis_store import RedisStore

T = TypeVar("T")


def producer_app(settings: Settings) -> Celery:
    """A Celery app that only sends messages, configured like the fleet (JSON, same queue)."""
    app = Celery("reflexr_graph.client", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


class Client(SyncFacade, Operations):
    """Enqueue and manage runs. Build it with :meth:`from_url` or :meth:`from_settings`.

    Its methods are the operation table's (``client/operations.py``), run blocking by :meth:`_do`.
    """

    def __init__(self, settings: Settings, store: RedisStore | None = None, *, by: str = "client") -> None:
        """``by`` is who the client acts as, recorded on what it does (see ``ClientBase.by``)."""
        super().__init__(settings, by)
        self.store: RedisStore = store or RedisStore.from_url(settings.redis_url, options=self.store_options)
        self._app: Celery | None = None

    @property
    def app(self) -> Celery:
        """The producer Celery app, created on first send."""
        if self._app is None:
            self._app = producer_app(self.settings)
        return self._app

    def close(self) -> None:
        """Release the Redis and broker connections."""
        if self._app is not None:
            self._app.close()
            self._app = None
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- how this client runs the table's operations (client/operations.py) -----------------

    def _handle(self, request: Request) -> Any:
        if isinstance(request, Publish):
            return send_run(self.app, request.run_id, request.graph, priority=request.priority)
        if isinstance(request, Envelope):
            if not self.settings.broker_is_store:
                return None
            return queued_message(self.app, request.run_id, request.graph, request.priority)
        return self.store.handle(request)

    def _do(self, op: Op[T], repeat: Repeat = READ) -> T:
        self.store.keep_clock()  # the operation's times are the store's (clock.py)
        # Each request is retried while Redis is unavailable, as ``repeat`` allows (client/failover.py).
        return drive(op, lambda request: call(self._failover, self._handle, request, repeat))

    def stream(
        self,
        run_id: str,
        *,
        topic: str | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[StreamItem]:
        """The items the run's steps emit (``reflexr_graph.emit``), live, oldest first, until the run ends.

        Starts after offset ``after`` (from the first item when None) and yields only ``topic``'s
        items when given (and the restart items, whatever their topic: see :class:`StreamItem`).
        It sleeps in XREAD BLOCK between items, and stops once the run has ended and every item
        it emitted was yielded. RunNotFound for no such run; WaitTimeout when the run has not
        ended within ``timeout`` seconds (None: as long as it takes).
        """
        cursor = StreamCursor.start(run_id, topic, after, timeout, self.store.max_block_ms)
        while not cursor.done:
            yield from cursor.take(self._do(cursor.read()))
