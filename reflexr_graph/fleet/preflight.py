"""A worker checks its Redis (and a RabbitMQ broker) once at start, and stops when no retry could help.

Celery retries a broker connection forever (``broker_connection_max_retries=None``), which
is right for an outage but wrong for a URL that can never work: a database the server does
not have, a wrong password, TLS on one side only, not a Redis server. Such a worker would
log the same error every few seconds and never run anything. So at ``worker_init`` it pings
the store once: a misconfiguration (or a Redis older than 7.0, which cannot run the scripts)
stops it with exit status 1 and one line saying what to fix; Redis merely down lets it start,
to connect once Redis answers. A store written by an older release has its keys moved to the
current layout there too, once (store/keyspace_migration.py). A Redis that answers but may lose
runs (it evicts keys, or persists nothing: store/durability.py) gets one WARNING line once the
worker is ready, when its log has its format (at ``worker_init`` it has none yet).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import amqp
import redis
from celery import signals

from reflexr_graph.config import broker
from reflexr_graph.errors import RedisMisconfigured, StoreUnavailable
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.store import keyspace_migration, server_version
from reflexr_graph.store.durability import durability_note, read_durability

log = logging.getLogger(__name__)


def _check(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp):
        return
    try:
        store = app.store()
        store.ping()
        store.do(server_version.check())
        _migrate(app)
    except RedisMisconfigured as exc:
        log.critical("%s; the worker stops: fix REFLEXR_REDIS_URL (or the server), then start it again", exc)
        # SystemExit, not an exception: Celery's signal dispatch logs and swallows exceptions.
        sys.exit(1)
    except StoreUnavailable as exc:
        log.warning("%s; the worker starts anyway and connects once Redis answers", exc)
    if broker.kind_of(app.reflexr_settings.broker) is broker.BrokerKind.AMQP:
        _check_rabbitmq(app)


def _migrate(app: FleetApp) -> None:
    """Keys of an older release's layout moved (store/keyspace_migration.py), before the consumer
    takes a message, so no keyed enqueue misses a key written before the upgrade."""
    try:
        keyspace_migration.migrate(app.store().client)
    # Its requests go through a store (translated: StoreUnavailable, RedisMisconfigured for a
    # command an ACL refuses), but a failed move never stops the worker, whatever the error.
    except (redis.RedisError, StoreUnavailable) as exc:
        log.warning(
            "moving keys of the older layout failed (%s); the worker starts anyway, and the next "
            "worker start tries again",
            type(exc).__name__,
        )


def _check_rabbitmq(app: FleetApp) -> None:
    """Stop on credentials or a vhost RabbitMQ refuses (no retry helps); start anyway if it is down."""
    conn = app.connection_for_write()
    where = f"{conn.hostname}:{conn.port}"  # never the URL: it holds the password
    try:
        conn.connect()
    except (amqp.exceptions.AccessRefused, amqp.exceptions.NotAllowed) as exc:
        log.critical(
            "RabbitMQ at %s refused the worker (%s: the user, password or vhost in REFLEXR_BROKER_URL); "
            "the worker stops: fix REFLEXR_BROKER_URL, or the user's permissions, then start it again",
            where,
            type(exc).__name__,
        )
        sys.exit(1)
    except (OSError, amqp.exceptions.AMQPError) as exc:
        log.warning(
            "RabbitMQ at %s did not answer (%s); the worker starts anyway and connects once it does",
            where,
            type(exc).__name__,
        )
    finally:
        conn.release()


def _check_durability(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp):
        return
    try:
        note = durability_note(app.store().do(read_durability()))
    except StoreUnavailable:
        return  # down at start: the reaper says so, and the check waits for the next start
    if note is not None:
        log.warning("%s; the worker runs on", note)


def install() -> None:
    signals.worker_init.connect(_check, weak=False)
    signals.worker_ready.connect(_check_durability, weak=False)
