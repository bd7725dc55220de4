"""The fleet's broker transport: kombu's Redis transport, with bad queue items moved aside.

kombu's Redis channel pops an item with BRPOP (or RPOP) and parses it as a message envelope
in the worker's main process, outside any error handler, so one item that is not an
envelope (``LPUSH reflexr 'not json'``) stops the worker, and every worker started while it
is queued. The hook sits at the narrowest point there is: the channel's Redis client, where
the reply to BRPOP or RPOP comes back. An item :func:`~reflexr_graph.fleet.envelope.envelope_problem`
finds unsafe is put in the quarantine list instead, and the reply becomes "nothing popped",
which kombu already handles; every other reply passes through untouched.

The fleet's app selects it with Celery's ``broker_transport`` for its redis:// and rediss://
URLs (and :class:`SentinelTransport` for redis+sentinel://); TLS options reach the channel as
with kombu's own transport. On RabbitMQ there is no such list: every delivery is a message, and
Celery's consumer (fleet/consumer.py) handles the ones it cannot run.

Both transports also keep their connection parameters after Celery drops a lost connection
(:class:`_KeepsItsClient`), so a Redis restart with an attempt running does not stop the worker,
and hold the deliveries that only name a recorded run in memory, without kombu's unacked
bookkeeping in Redis (fleet/acks.py). Their clients report a Redis that cannot serve for now
(full, busy, a read-only replica: store/connection_errors.py server_state) as a lost connection,
which kombu rides out, rather than as an error reply, which stops a worker.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import redis
import redis.sentinel
from kombu.transport import redis as kombu_redis

from reflexr_graph.fleet import acks
from reflexr_graph.fleet.envelope import envelope_problem
from reflexr_graph.fleet.quarantine import move_aside
from reflexr_graph.store import connection_errors

log = logging.getLogger(__name__)


class _Screened:
    """A redis-py client whose BRPOP and RPOP replies pass ``screen(key, item)`` first.

    ``screen`` returns False for an item it moved aside; the reply is then what an empty
    queue gives (None), so kombu's channel polls on.
    """

    def __init__(self, *args: Any, screen: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._screen = screen

    def parse_response(self, connection: Any, command_name: Any, **options: Any) -> Any:
        # kombu sends BRPOP on its own connection and reads the reply with this method.
        reply = super().parse_response(connection, command_name, **options)  # type: ignore[misc]
        if command_name == "BRPOP" and reply:
            key, item = reply
            if not self._screen(key, item):
                return None
        return reply

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            reply = super().execute_command(*args, **options)  # type: ignore[misc]
        except redis.ResponseError as exc:
            state = connection_errors.server_state(exc)
            if state is None:
                raise
            # A full Redis (OOM), a busy one, a read-only replica: kombu stops the worker on an error
            # reply ("Unrecoverable error": a worker starting while Redis was full declared its
            # queues, and died) but skips a tick, or reconnects backing off, on a lost connection.
            # The state passes, as a lost connection comes back. BRPOP still works meanwhile.
            raise redis.ConnectionError(f"Redis cannot serve the broker now ({state}); retrying") from exc
        # kombu's synchronous get pops with a plain RPOP of one item.
        if (
            len(args) == 2
            and args[0] == "RPOP"
            and isinstance(reply, bytes)
            and not self._screen(args[1], reply)
        ):
            return None
        return reply


class ScreenedRedis(_Screened, redis.Redis):
    pass


class ScreenedPrefixedRedis(_Screened, kombu_redis.PrefixedStrictRedis):
    """The same, for a channel with kombu's ``global_keyprefix`` option."""


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class _ScreeningChannel:
    """What makes a kombu Redis channel's clients move bad items aside as they pop them."""

    global_keyprefix: str
    sep: str
    codecs: Any
    decode_body: Any
    conn_or_acquire: Any

    def _get_client(self) -> Any:
        # The one place kombu picks the class of its clients (BRPOP's included): an internal
        # method, but the narrowest hook there is.
        super()._get_client()  # type: ignore[misc]  # kombu's check of the redis-py version
        if self.global_keyprefix:
            return functools.partial(
                ScreenedPrefixedRedis, screen=self._screen, global_keyprefix=self.global_keyprefix
            )
        return functools.partial(ScreenedRedis, screen=self._screen)

    def _screen(self, key: Any, item: bytes) -> bool:
        """True for an item kombu may read; otherwise move it aside and return False."""
        problem = envelope_problem(item, codecs=self.codecs, decode_body=self.decode_body)
        if problem is None:
            return True
        # The list's name, without the priority suffix kombu appends to it.
        queue = _text(key).rsplit(self.sep, 1)[0]
        try:
            with self.conn_or_acquire() as client:
                move_aside(client, queue=queue, reason=problem.reason, detail=problem.detail, raw=item)
        except getattr(self, "connection_errors", ()):
            # The item is already popped: with Redis gone it can be neither quarantined nor put
            # back. Raised on, kombu reconnects as for any broker error.
            log.error(
                "queue item from %r (%s, %d bytes) is lost: Redis failed while moving it aside; the "
                "worker reconnects",
                queue,
                problem.reason.value,
                len(item),
            )
            raise
        except Exception:
            log.exception(
                "queue item from %r (%s, %d bytes) could not be moved aside and is dropped; the worker "
                "carries on",
                queue,
                problem.reason.value,
                len(item),
            )
        return False


class Channel(_ScreeningChannel, kombu_redis.Channel):
    """kombu's Redis channel, whose clients move bad items aside as they pop them."""

    QoS = acks.QoS


REFUSALS = ("NOREPLICAS", "MASTERDOWN")
"""Replies of a primary that cannot take writes for now: too few replicas (min-replicas-to-write),
or a replica whose primary is gone. Both pass once the failover is over."""


class FailoverAwareConnection(redis.sentinel.SentinelManagedConnection):
    """A sentinel-managed connection that reports a primary's temporary refusal as a lost connection.

    kombu stops the worker on a ResponseError ("Unrecoverable error") but reconnects, backing
    off, on a ConnectionError. Right after a failover the new primary refuses writes until a
    replica acknowledges it (min-replicas-to-write, docs/design.md#redis-high-availability); that
    must be a reconnect, not a dead worker. Disconnecting makes the reconnect ask the sentinels.
    """

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except redis.ResponseError as exc:
            code = str(exc).split(" ", 1)[0]
            if code not in REFUSALS:
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            raise redis.ConnectionError(
                f"the Redis primary refuses writes for now ({code}); reconnecting"
            ) from exc


class SentinelChannel(_ScreeningChannel, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel (the primary found through Sentinel), screening as :class:`Channel`."""

    QoS = acks.QoS

    connection_class = FailoverAwareConnection


class _KeepsItsClient:
    """A transport that keeps its connection's parameters (``client``) for as long as it lives.

    When the broker connection is lost, Celery's consumer closes the kombu Connection, which
    detaches its transport first (``transport.client = None``) and closes the channel after. That
    channel still has work that needs the parameters: closing it restores the messages it
    delivered and no attempt acked yet, and an attempt still running acks its message on it
    later. Every one of those builds a Redis pool from ``transport.client``, so each raised
    AttributeError instead of a connection error, which stopped the worker ("Unrecoverable
    error") whenever a Redis restart found an attempt running. The detach is only there to
    break a reference cycle, which the garbage collector breaks as well.
    """

    _client: Any = None

    @property
    def client(self) -> Any:
        return self._client

    @client.setter
    def client(self, value: Any) -> None:
        if value is not None:
            self._client = value


class _Poller(kombu_redis.MultiChannelPoller):
    """kombu's poller, whose refresh of the queues' bindings skips a tick Redis cannot serve.

    The refresh is a MULTI pipeline, which does not pass the client's ``execute_command``
    (:class:`_Screened`): a full Redis refuses it with an error reply, which kombu logged as a
    warning with a traceback every tick of the outage, where a lost connection skips the tick
    quietly. Refused for a state that passes, it is skipped quietly too; the next tick tries again.
    """

    def maybe_refresh_binding_expiry(self) -> None:
        channels: Any = getattr(self, "_channels", ())
        for channel in channels:
            try:
                channel.maybe_refresh_binding_expiry()
            except channel.connection_errors:
                log.debug("refreshing the queue bindings skipped (connection lost); tried again next tick")
            except redis.ResponseError as exc:
                state = connection_errors.server_state(exc)
                if state is None:
                    log.warning("refreshing the queue bindings failed (%s); tried again next tick", exc)
                else:
                    log.debug(
                        "refreshing the queue bindings skipped (Redis: %s); tried again next tick", state
                    )


class _RidesOutServerStates(kombu_redis.Transport):
    """A transport with the fleet's :class:`_Poller`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycle = _Poller()


class Transport(_RidesOutServerStates, _KeepsItsClient, kombu_redis.Transport):
    """kombu's Redis transport with the fleet's :class:`Channel`."""

    Channel = Channel


class SentinelTransport(_RidesOutServerStates, _KeepsItsClient, kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with the fleet's :class:`SentinelChannel`."""

    Channel = SentinelChannel
