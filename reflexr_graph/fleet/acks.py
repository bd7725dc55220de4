"""Ack emulation for the fleet's Redis channels: kombu's, without its Redis bookkeeping for the
messages that only name a recorded run.

kombu's Redis transport emulates acks: every delivery is written to the ``unacked`` hash and
``unacked_index`` (a MULTI of ZADD and HSET) and taken out again at the ack (another MULTI), so
that a worker that dies holding a message has it restored after the visibility timeout. For a
message that carries only a run id (``graph`` and no ``inputs``: the Client's, the create script's
and the reaper's), that copy is redundant: the run is recorded, and every run that is queued or
retrying is in the store's due set and every running one holds a lease, so the reaper sends it
again whatever happened to its message (docs/design.md#celery-on-redis). Those deliveries are
held in memory only: the prefetch limit still counts them, a rejected or requeued one (a pool
child lost, a soft shutdown) is pushed back from memory as kombu would, and one held by a worker
that dies is recovered by the due set or the lease, as it already was long before the visibility
timeout. A message that carries inputs (a foreign producer's, which is its run's only record
until a worker records it) keeps kombu's bookkeeping.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from reflexr_graph.config.dispatch import TASK_NAME
from reflexr_graph.store import connection_errors

log = logging.getLogger(__name__)


def names_a_recorded_run(message: Any) -> bool:
    """True for a ``reflexr_graph.run`` message whose only argument is ``graph``: its run is
    recorded, with a due entry or a lease, before such a message is sent."""
    headers = message.headers or {}
    if headers.get("task") != TASK_NAME or message.content_type != "application/json":
        return False
    try:
        args, kwargs, _embed = json.loads(message.body)
    except (TypeError, ValueError):
        return False
    return args == [] and isinstance(kwargs, dict) and list(kwargs) == ["graph"]


class QoS(kombu_redis.QoS):
    """kombu's Redis ack emulation, keeping the deliveries that name a recorded run in memory only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_memory: set[str] = set()
        """Tags of deliveries held here only, not acked or restored yet."""

    def append(self, message: Any, delivery_tag: str) -> None:
        if not names_a_recorded_run(message):
            super().append(message, delivery_tag)
            return
        self._in_memory.add(delivery_tag)
        virtual.QoS.append(self, message, delivery_tag)  # counted against the prefetch limit

    def ack(self, delivery_tag: str) -> None:
        if delivery_tag in self._in_memory:
            self._in_memory.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if delivery_tag in self._in_memory:
            if requeue:
                self.restore_by_tag(delivery_tag, leftmost=True)
            self._in_memory.discard(delivery_tag)
            virtual.QoS.ack(self, delivery_tag)
            return
        super().reject(delivery_tag, requeue=requeue)

    def restore_by_tag(self, tag: Any, client: Any = None, leftmost: bool = False) -> None:
        """Put the delivery back on its queue: from memory when it is held here, else as kombu does.

        kombu's ``restore_unacked`` (a worker's channel closing: shutdown, a lost connection) calls
        this for every delivery not acked yet.
        """
        tag = tag.decode() if isinstance(tag, bytes) else tag
        if tag not in self._in_memory:
            super().restore_by_tag(tag, client=client, leftmost=leftmost)
            return
        self._in_memory.discard(tag)
        message = (self._delivered or {}).get(tag)
        if message is None:
            return
        delivery = message.delivery_info
        channel: Any = self.channel  # a kombu Redis channel
        try:
            with channel.conn_or_acquire(client) as conn:
                pipe = conn.pipeline(transaction=False)
                channel._do_restore_message(
                    message._raw, delivery["exchange"], delivery["routing_key"], pipe, leftmost
                )
                pipe.execute()
        except redis.ResponseError as exc:
            # A full Redis (or a busy, loading or read-only one) refuses the LPUSH. Raised, it stopped
            # the worker; the run is recorded with its due entry, so the message is not needed.
            state = connection_errors.server_state(exc)
            if state is None:
                raise
            log.warning(
                "message of run %s not put back on queue %s (Redis: %s); the reaper sends the run again "
                "once Redis serves it",
                message.headers.get("id"),
                delivery["routing_key"],
                state,
            )
            return
        log.info(
            "message of run %s put back on queue %s; a worker takes it next",
            message.headers.get("id"),
            delivery["routing_key"],
        )
