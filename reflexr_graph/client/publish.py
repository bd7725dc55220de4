"""Writing a run's Celery message the way kombu's Redis transport queues it, without kombu.

When the broker is the store's own Redis, a client answers an ``Envelope`` request
(store/ops.py) with :func:`queued_message`, and the script that records or queues the run
(``create_run.lua``, ``signal.lua``) pushes it with its write: enqueue is one round trip, and a
run is never recorded without its message. A message sent later (replay, recovery) goes through
kombu on the sync client; kombu has no asyncio API, so the async client pushes those itself too
(one LPUSH onto the graph's queue, as any non-Python producer of the task contract does),
through ``redis.asyncio``. Celery builds the message itself (``app.amqp.as_task_v2``, kombu's
serializer); only the transport's envelope is written here, and
``tests/surfaces/test_async_client.py`` checks it against the one kombu writes.

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
from reflexr_graph.store.ops import QueuedMessage, cmd


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


def queued_message(app: Celery, run_id: str, graph: str, priority: int | None = None) -> QueuedMessage:
    """The message of ``send_run(app, run_id, graph, priority=priority)`` and the broker list
    kombu's Redis transport would push it onto (one list per priority)."""
    queue = graph_queue(app.conf.task_default_queue, graph)
    return QueuedMessage(
        keys.broker_queue(queue, priority or 0), envelope(app, run_id, graph, queue, priority)
    )


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
        message = queued_message(self.app, run_id, graph, priority)
        await store.handle(cmd("lpush", message.queue_key, message.item))

    def message(self, run_id: str, graph: str, priority: int | None = None) -> QueuedMessage | None:
        """The answer to an ``Envelope`` request: :func:`queued_message` for a script to push, or
        None when the broker is not the store's Redis."""
        return queued_message(self.app, run_id, graph, priority) if self.fast_path else None

    def close(self) -> None:
        self.app.close()
