"""The broker-specific part of the fleet's Celery configuration: Redis, Redis Sentinel or RabbitMQ.

Whatever the broker, the store, leases and checkpoints stay in Redis (``REFLEXR_REDIS_URL``);
the broker (``REFLEXR_BROKER_URL``, the store's Redis by default) only carries the
``reflexr_graph.run`` messages. The research behind each setting is in docs/design.md
(#celery-on-redis, #rabbitmq-as-the-broker, #redis-high-availability).
"""

from __future__ import annotations

import ssl
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reflexr_graph.config.dispatch import AMQP_SCHEMES, PRIORITIES
from reflexr_graph.config.settings import Settings
from reflexr_graph.store import sentinel

UNACKED_RESTORE_INTERVAL_S = 5
"""How often kombu looks for unacked messages older than the visibility timeout."""
SOCKET_TIMEOUT_S = 10.0
SOCKET_CONNECT_TIMEOUT_S = 5.0
HEALTH_CHECK_INTERVAL_S = 10
TRANSPORT = "reflexr_graph.fleet.transport:Transport"
SENTINEL_TRANSPORT = "reflexr_graph.fleet.transport:SentinelTransport"
AMQP_HEARTBEAT_S = 60
"""AMQP heartbeats, so a dead TCP peer is noticed in about two intervals rather than never."""


class BrokerKind(StrEnum):
    REDIS = "redis"
    SENTINEL = "sentinel"
    AMQP = "amqp"


def kind_of(url: str) -> BrokerKind:
    scheme = urlsplit(url).scheme
    if scheme in AMQP_SCHEMES:
        return BrokerKind.AMQP
    if scheme == sentinel.SCHEME:
        return BrokerKind.SENTINEL
    return BrokerKind.REDIS


def _ssl_options(redis_url: str) -> dict[str, Any] | None:
    """Certificate checking for rediss:// unless the URL says otherwise.

    kombu's own rediss transport falls back to CERT_NONE, which accepts any certificate;
    redis-py (the store) verifies by default, and the broker connection should not be weaker.
    The fleet's transport is not selected by the URL's scheme, so kombu knows the connection
    is TLS from these options, or from the URL's own ``ssl_*`` options (kombu parses them):
    for rediss:// one of the two is always there.
    """
    parts = urlsplit(redis_url)
    if parts.scheme != "rediss":
        return None
    if any(key.startswith("ssl_") for key in parse_qs(parts.query)):
        return None  # the URL's own ssl_* options win
    return {"ssl_cert_reqs": ssl.CERT_REQUIRED}


def _redis_transport_options(settings: Settings) -> dict[str, Any]:
    return {
        "visibility_timeout": settings.visibility_timeout_s,
        "unacked_restore_interval": UNACKED_RESTORE_INTERVAL_S,
        "unacked_restore_throttle": 1,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": SOCKET_CONNECT_TIMEOUT_S,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        # One list per priority 0..9, each served before the next (config/dispatch.py: PRIORITIES).
        "priority_steps": list(PRIORITIES),
    }


def _redis_config(settings: Settings) -> dict[str, Any]:
    url = settings.broker
    return {
        "broker_url": url,
        # kombu's Redis transport, moving aside a queue item that is not a message instead of
        # stopping the worker on it; the URL's scheme and TLS options apply as before.
        "broker_transport": TRANSPORT,
        "broker_use_ssl": _ssl_options(url),
        "broker_transport_options": _redis_transport_options(settings),
    }


def _sentinel_config(settings: Settings) -> dict[str, Any]:
    address = sentinel.parse(settings.broker)
    return {
        # kombu spells the sentinels its own way; the primary's name goes in the options.
        "broker_url": address.kombu_url(),
        "broker_transport": SENTINEL_TRANSPORT,
        "broker_transport_options": {
            **_redis_transport_options(settings),
            **address.kombu_transport_options(),
        },
    }


def _amqp_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker,
        # Quorum queues are replicated (Raft) and survive a node's loss; classic queues do not.
        # Every queue the fleet or a producer of its app declares gets the type: the base queue,
        # each graph's queue (created as "missing" from its name) and the forwarding targets.
        "task_default_queue_type": "quorum",
        "task_create_missing_queue_type": "quorum",
        # Quorum queues refuse global QoS; Celery then sets a per-consumer prefetch instead.
        "worker_detect_quorum_queues": True,
        "broker_heartbeat": AMQP_HEARTBEAT_S,
        "broker_transport_options": {
            # send_task returns only once RabbitMQ has taken the message (publisher confirms):
            # without it, a run's message could be lost in a connection that drops after publish.
            "confirm_publish": True,
        },
        "broker_use_ssl": _amqps_options(settings.broker),
    }


def _amqps_options(url: str) -> dict[str, Any] | None:
    """For amqps://, a verified certificate for the URL's host name.

    py-amqp checks the host name only when it is given one, and kombu gives none, so without
    this a certificate for any host that a trusted CA signed would be accepted.
    """
    parts = urlsplit(url)
    if parts.scheme != "amqps":
        return None
    return {"cert_reqs": ssl.CERT_REQUIRED, "server_hostname": parts.hostname}


def broker_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings that depend on the broker ``settings.broker`` names."""
    kind = kind_of(settings.broker)
    if kind is BrokerKind.AMQP:
        return _amqp_config(settings)
    if kind is BrokerKind.SENTINEL:
        return _sentinel_config(settings)
    return _redis_config(settings)
