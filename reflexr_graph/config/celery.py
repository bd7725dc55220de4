"""The Celery configuration of the fleet, for at-least-once delivery on Redis or RabbitMQ.

Workers run with it and clients send with it, so both agree on serializers, queues and the broker.
Every setting here follows the research in docs/design.md#celery-on-redis; the comments say what goes
wrong without it.
"""

from __future__ import annotations

from typing import Any

from reflexr_graph.config import broker
from reflexr_graph.config.settings import Settings

# A string, not an import: the consumer is the worker's, and clients never load it.
CONSUMER = "reflexr_graph.fleet.consumer:FleetConsumer"


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration the fleet runs with."""
    return {
        # The broker's own settings (Redis, Sentinel or RabbitMQ): config/broker.py.
        **broker.broker_config(settings),
        # No result backend: outcomes live in the store, where the Client reads them.
        "task_ignore_result": True,
        # JSON only (G6): a pickled message could run code in the worker.
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        # At-least-once: the message is acked only after the attempt ended, and a worker
        # lost mid-task puts it back rather than dropping it.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # SIGTERM (remapped to SIGQUIT) waits this long for the running attempt, then
        # cancels it and requeues its message at once.
        "worker_soft_shutdown_timeout": settings.soft_shutdown_timeout_s,
        # An idle worker has nothing to wait for, so it stops at once: on idle, Celery would
        # sleep the whole timeout, which only helps ETA messages, and the fleet sends none.
        "worker_enable_soft_shutdown_on_idle": False,
        # Not cancelled: the lease, not the broker connection, is the attempt's right to the run.
        # A Redis blip drops the connection, and cancelling then threw every running attempt
        # away (a paid model call in flight included); the heartbeat keeps the lease for its TTL
        # and gives the attempt up only then. The message cannot be acked on the lost connection,
        # so Celery delivers it again: at least once, as designed, and the fencing makes the copy
        # harmless (its claim finds the lease held, or the run finished, and drops it). Set
        # explicitly, since Celery 6 turns the default to True; Celery 5's notice of that at each
        # lost connection is silenced in the worker (fleet/connection_loss.py).
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_connection_retry_on_startup": True,
        # A worker must outlast a long Redis outage rather than exit after 100 retries.
        "broker_connection_max_retries": None,
        "task_default_queue": settings.queue,
        # Celery's consumer, with the messages it rejects quarantined instead of dropped.
        "worker_consumer": CONSUMER,
        "worker_hijack_root_logger": False,
    }
