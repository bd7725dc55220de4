"""Sending a run's Celery message from asyncio code, without a thread, or from a store script.

kombu has no asyncio API, so when the broker is the store's own Redis, the async client writes
the message the way kombu's Redis transport does (one LPUSH onto the graph's queue, as any
non-Python producer of the task contract does), through ``redis.asyncio``. Celery builds the
message itself (``app.amqp.as_task_v2``, kombu's serializer); only the transport's envelope is
written here, and ``tests/surfaces/test_async_client.py`` checks it against the one kombu writes.
Both clients also hand that item to a script that queues a run (``signal.lua``), which pushes it
in the same round trip.

Any other broker (RabbitMQ, or a Redis that is not the store's) gets the message through
Celery's own producer pool, in a worker thread: AMQP has no envelope to write by hand, and
publisher confirms must be waited for.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import uuid
from typing import Any

from celery import Celery
from kombu.serialization import dumps
from opentelemetry import propagate

from reflexr_graph.config.celery import celery_config
from reflexr_graph.config.dispatch import TASK_NAME, graph_queue, send_run
from reflexr_graph.config.settings import Settings
from reflexr_graph.store import keys
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.ops import cmd


def envelope(app: Celery, run_id: str, graph: str, queue: str, priority: int | None = None) -> str:
    """The queue item kombu's Redis transport would push for ``send_run(app, run_id, graph)``."""
    message = app.amqp.as_task_v2(run_id, TASK_NAME, args=(), kwargs={"graph": graph})
    # The caller's trace in the headers, where Celery's OpenTelemetry instrumentation puts it.
    propagate.inject(message.headers)
    content_type, content_encoding, body = dumps(message.body, serializer="json")
    raw = body if isinstance(body, bytes) else body.encode(content_encoding)
    item: dict[str, Any] = {
        "body": base64.b64encode(raw).decode("ascii"),
        "content-encoding": content_encoding,
        "content-type": content_type,
        "headers": message.headers,
        "properties": {
            **message.properties,
            "delivery_mode": 2,  # persistent, as Celery sends tasks
            # The default exchange: the routing key is the queue, as kombu routes Celery's queues.
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": priority or 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    return json.dumps(item)


def queue_item(app: Celery, run_id: str, graph: str, priority: int | None = None) -> tuple[str, str]:
    """The broker list the run's message goes onto, and the item to push there (:func:`envelope`)."""
    queue = graph_queue(app.conf.task_default_queue, graph)
    return keys.broker_queue(queue, priority or 0), envelope(app, run_id, graph, queue, priority)


class MessageSender:
    """Builds run messages with a producer Celery app and pushes them with an async store."""

    def __init__(self, settings: Settings) -> None:
        self.app = Celery("reflexr_graph.client", set_as_current=False)
        self.app.conf.update(celery_config(settings))
        # The LPUSH goes through the store's connection, so only when the broker is that Redis.
        self.fast_path = settings.broker_is_store

    async def send(self, store: AsyncStore, run_id: str, graph: str, priority: int | None = None) -> None:
        """Queue ``reflexr_graph.run`` for the recorded run, as ``fleet.dispatch.send_run`` does."""
        if not self.fast_path:
            await asyncio.to_thread(functools.partial(send_run, self.app, run_id, graph, priority=priority))
            return
        await store.handle(cmd("lpush", *queue_item(self.app, run_id, graph, priority)))

    def item(self, run_id: str, graph: str, priority: int | None = None) -> tuple[str, str] | None:
        """:func:`queue_item` for a script to push, or None when the broker is not the store's Redis."""
        return queue_item(self.app, run_id, graph, priority) if self.fast_path else None

    def close(self) -> None:
        self.app.close()
