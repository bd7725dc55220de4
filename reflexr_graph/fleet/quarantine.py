"""Moving a bad queue item aside: the one helper for every place a worker finds an item it cannot run.

Three places find them, from the rawest to the most Celery-specific: the broker transport (an
item that is not a kombu message at all, fleet/transport.py), Celery's consumer (an envelope
Celery cannot decode or has no task for, fleet/consumer.py) and the task's strategy guard (a
task message of the wrong shape, fleet/guard.py). Each calls :func:`move_aside`: the item is
put in the quarantine list (store/quarantine.py) with its reason, counted
(``reflexr.queue.quarantined``) and logged once, and the worker carries on with the next item.

Log lines name the reason, the queue and the size, never the item's content: inputs may be
private. The entry in Redis keeps the item itself, for the operator.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import redis
from kombu.utils.json import dumps

from reflexr_graph.core import metrics
from reflexr_graph.model import QuarantinedItem
from reflexr_graph.store.quarantine import Quarantine

log = logging.getLogger(__name__)

DETAIL_LIMIT = 300


class QuarantineReason(StrEnum):
    """Why an item was moved aside; stable codes, shown by ``reflexr-graph dlq messages``."""

    NOT_UTF8 = "not_utf8"
    """The item's bytes are not UTF-8 text."""
    NOT_JSON = "not_json"
    """The item is not JSON (or is JSON that kombu cannot read back, such as a bad ``__type__`` marker)."""
    NOT_ENVELOPE = "not_envelope"
    """The item is JSON, but not a kombu message envelope (a scalar, a list, an object without properties)."""
    BAD_ENVELOPE = "bad_envelope"
    """An envelope whose fields have the wrong types (headers, properties, delivery info, content type)."""
    UNDECODABLE_BODY = "undecodable_body"
    """The body does not decode: bad base64, bad JSON, an unknown compression."""
    CONTENT_NOT_ALLOWED = "content_not_allowed"
    """The body's content type is not JSON (pickle, for one): never deserialized (G6)."""
    NOT_A_TASK = "not_a_task"
    """A message without a task name in its headers or body."""
    UNKNOWN_TASK = "unknown_task"
    """A task name this worker has not registered, on one of the fleet's queues."""
    INVALID_TASK = "invalid_task"
    """A task message Celery could not accept: wrong shape of body or headers, a bad ETA or expiry."""
    BAD_NAME = "bad_name"
    """A run message whose graph name is not one (``core/action.py: NAME_PATTERN``: 1 to 100 of
    A-Z a-z 0-9 _ . -): it could hold terminal escapes or the event codec's separator, or be huge."""
    HANDLER_ERROR = "handler_error"
    """Handling the message raised something unforeseen; moved aside rather than stop the worker."""


def move_aside(client: redis.Redis, *, queue: str, reason: QuarantineReason, detail: str, raw: bytes) -> None:
    """Put ``raw`` in the quarantine list with ``reason``, count it and log it once.

    ``detail`` says what is wrong in words of our own, never values from the item: it is
    logged. Redis errors are raised as they are: every caller runs inside kombu or Celery,
    which reconnect on them.
    """
    detail = detail[:DETAIL_LIMIT]
    Quarantine(client).put(QuarantinedItem.of(queue=queue, reason=reason.value, detail=detail, raw=raw))
    metrics.QUARANTINED.add(1, {metrics.ATTR_REASON: reason.value})
    log.error(
        "queue item moved aside to the quarantine list (%s: %s; %d bytes, queue %r); the worker carries "
        "on with the next item. `reflexr-graph dlq messages` shows it: fix its producer, then clear it "
        "with `reflexr-graph dlq messages --purge`",
        reason.value,
        detail,
        len(raw),
        queue,
    )


def raw_of(message: Any) -> bytes:
    """The envelope of a message kombu already read, as JSON again.

    kombu's virtual transport keeps the parsed envelope as ``_raw`` (its unacked hash stores
    the same); other transports get the parts kombu exposes.
    """
    payload = getattr(message, "_raw", None)
    if payload is None:
        payload = {"headers": message.headers, "properties": message.properties, "body": message.body}
    try:
        return dumps(payload).encode("utf-8")
    except (TypeError, ValueError):
        return repr(payload).encode("utf-8", errors="replace")


def queue_of(message: Any) -> str:
    """The queue a message came from: its routing key (the fleet's queues are bound by their name)."""
    info = message.delivery_info if isinstance(message.delivery_info, dict) else {}
    return str(info.get("routing_key") or "?")


@contextlib.contextmanager
def _quarantine_client(message: Any, app: Any) -> Iterator[redis.Redis]:
    """The Redis that holds the quarantine list: the broker's channel's own, or else the store's.

    On RabbitMQ the channel has no Redis behind it; the list lives in the store's Redis, so
    ``reflexr-graph dlq messages`` shows every bad message whatever the broker.
    """
    acquire = getattr(message.channel, "conn_or_acquire", None)
    if acquire is not None:
        with acquire() as client:
            yield client
        return
    store = getattr(app, "store", None)
    if store is None:
        raise TypeError(f"no store to quarantine a message from {queue_of(message)!r} in: not a fleet app")
    yield store().client


def move_message_aside(message: Any, reason: QuarantineReason, detail: str, *, app: Any = None) -> None:
    """Quarantine a message kombu delivered, then ack it so that it is not delivered again.

    Acked only once it is in the list: if Redis fails in between, the message stays unacked
    and the broker delivers it again, rather than it being lost. ``app`` (the fleet's) gives the
    store's Redis for a broker that is not Redis.
    """
    with _quarantine_client(message, app) as client:
        move_aside(client, queue=queue_of(message), reason=reason, detail=detail, raw=raw_of(message))
    if not message.acknowledged:
        message.ack_log_error(log, getattr(message.channel, "connection_errors", ()))
