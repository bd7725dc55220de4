"""The Celery app of the fleet, configured for at-least-once delivery on Redis or RabbitMQ.

Every setting here follows the research in docs/design.md#celery-on-redis; the comments say what goes wrong
without it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from celery import Celery
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from reflexr_graph.core.action import GraphAction
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.fleet import broker
from reflexr_graph.fleet.settings import Settings
from reflexr_graph.store.redis_store import RedisStore

SOCKET_TIMEOUT_S = 10.0
SOCKET_CONNECT_TIMEOUT_S = 5.0
STORE_RETRIES = 2
CONSUMER = "reflexr_graph.fleet.consumer:FleetConsumer"


class FleetApp(Celery):
    """A Celery app that also carries the fleet's settings, graph registry and store."""

    def __init__(self, settings: Settings, registry: Mapping[str, GraphAction], **kwargs: Any) -> None:
        super().__init__("reflexr_graph", **kwargs)
        self.reflexr_settings = settings
        self.reflexr_registry: dict[str, GraphAction] = dict(registry)
        self._store: RedisStore | None = None
        self._store_pid = 0

    def new_store(self) -> RedisStore:
        """A store with its own connection pool, for a thread that must not share one."""
        settings = self.reflexr_settings
        return RedisStore.from_url(
            settings.redis_url,
            run_retention_s=settings.run_retention_s,
            dead_retention_s=settings.dead_retention_s,
            max_interruptions=settings.max_interruptions,
            checkpoint_history=settings.checkpoint_history,
            # A renewal must fail before the lease lapses, not hang past it.
            socket_timeout=min(SOCKET_TIMEOUT_S, max(1.0, settings.lease_ttl_s / 2)),
            socket_connect_timeout=min(SOCKET_CONNECT_TIMEOUT_S, max(1.0, settings.lease_ttl_s / 2)),
            # redis-py's default retries back off for seconds; an attempt must learn of an
            # outage well within its lease TTL, so a blip is retried quickly and no more.
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), STORE_RETRIES),
        )

    def store(self) -> RedisStore:
        """This process's store, created on first use (pool children each get their own)."""
        pid = os.getpid()
        if self._store is None or self._store_pid != pid:
            store = self.new_store()
            with contextlib.suppress(StoreUnavailable):
                # Loaded now, no first call pays a NOSCRIPT round trip; if Redis is down, the
                # first calls load them (redis-py retries NOSCRIPT with the script's text).
                store.preload_scripts()
            self._store, self._store_pid = store, pid
        return self._store


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration the fleet runs with."""
    return {
        # The broker's own settings (Redis, Sentinel or RabbitMQ): fleet/broker.py.
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
        # away; the heartbeat keeps the lease for its TTL and gives the attempt up only then. The
        # message Celery restores meanwhile is dropped as a duplicate by the claim.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_connection_retry_on_startup": True,
        # A worker must outlast a long Redis outage rather than exit after 100 retries.
        "broker_connection_max_retries": None,
        "task_default_queue": settings.queue,
        # Celery's consumer, with the messages it rejects quarantined instead of dropped.
        "worker_consumer": CONSUMER,
        "worker_hijack_root_logger": False,
    }


def create_app(settings: Settings, registry: Mapping[str, GraphAction]) -> FleetApp:
    """A configured app with the ``reflexr_graph.run`` task and the worker hooks registered."""
    # Imported here: these modules import this one for FleetApp.
    from reflexr_graph.fleet import (
        pools,
        preflight,
        reaper,
        routing,
        sigterm,
        startup_log,
        task,
        telemetry_hooks,
        watchdog,
    )

    app = FleetApp(settings, registry)
    app.conf.update(celery_config(settings))
    task.register(app)
    # Each install() connects module-level receivers to Celery's signals; Celery keeps one entry
    # per receiver, so building many apps in one process (tests, clients) connects each once.
    reaper.install()
    routing.install()
    pools.install()
    watchdog.install()
    preflight.install()
    telemetry_hooks.install()
    sigterm.install()
    startup_log.install()
    return app
