"""Why Redis could not be used, as one line that says what to fix.

redis-py and kombu report a wrong URL in many shapes: a refused connection, a TLS
handshake that times out, ``DB index is out of range``, ``Protocol error, got "<"``...
:func:`translate` turns each into ``errors.StoreUnavailable`` (the server is down or
slow: retrying can help) or ``errors.RedisMisconfigured`` (the URL or the server's setup
is wrong: retrying cannot help). Messages name the host and port, never the password, and
never quote what the server sent.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio
from redis import exceptions as redis_errors
from redis.backoff import NoBackoff
from redis.retry import Retry

from reflexr_graph import errors
from reflexr_graph.store import cluster

URL_SETTING = "REFLEXR_REDIS_URL"
"""The setting that holds the URL (fleet.settings; named here because the store sits below it)."""
_PROBE_TIMEOUT_S = 1.0
_CHAIN_DEPTH = 8
_SOCKET_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    ssl.SSLError,
)
"""Errors of the network itself; other OSErrors (a missing file...) are not about Redis."""


@dataclass(frozen=True)
class Endpoint:
    """Where the failed call went: enough to say what to fix, without any credential."""

    host: str = "?"
    port: int | None = None
    db: int = 0
    tls: bool = False
    has_password: bool = False
    connect_timeout_s: float | None = None
    read_timeout_s: float | None = None

    @property
    def where(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @classmethod
    def of_client(cls, client: redis.Redis | redis.asyncio.Redis) -> Endpoint:
        if cluster.is_cluster(client):  # no one host: each slot's primary answers its keys
            kw = cluster.connection_kwargs(client)
            return cls(
                host="the Redis Cluster",
                tls=bool(kw.get("ssl"))
                or issubclass(
                    kw.get("connection_class", redis.Connection),
                    (redis.SSLConnection, redis.asyncio.SSLConnection),
                ),
                has_password=bool(kw.get("password")),
                connect_timeout_s=kw.get("socket_connect_timeout"),
                read_timeout_s=kw.get("socket_timeout"),
            )
        pool = client.connection_pool
        kw = pool.connection_kwargs
        service = getattr(pool, "service_name", None)
        if service:  # a Sentinel-managed pool: no fixed host, the primary moves on failover
            host, port = f"the primary {service!r} (found through Sentinel)", None
        else:
            host = str(kw.get("path") or kw.get("host", "localhost"))
            port = None if kw.get("path") else int(kw.get("port", 6379))
        return cls(
            host=host,
            port=port,
            db=int(kw.get("db") or 0),
            tls=issubclass(pool.connection_class, (redis.SSLConnection, redis.asyncio.SSLConnection)),
            has_password=bool(kw.get("password")),
            connect_timeout_s=kw.get("socket_connect_timeout"),
            read_timeout_s=kw.get("socket_timeout"),
        )

    @classmethod
    def of_url(cls, url: str | None) -> Endpoint:
        """The endpoint of a ``redis://`` or ``rediss://`` URL (the broker's, for kombu errors)."""
        if not url:
            return cls()
        parts = urlsplit(url)
        try:
            port = parts.port or 6379
        except ValueError:
            port = None
        db = parts.path.strip("/")
        return cls(
            host=parts.hostname or "localhost",
            port=port,
            db=int(db) if db.isdigit() else 0,
            tls=parts.scheme == "rediss",
            has_password=bool(parts.password),
        )


def endpoint_of(client: redis.Redis | None) -> Endpoint:
    """The endpoint of ``client``; an unknown one (``?``) without a client."""
    return Endpoint() if client is None else Endpoint.of_client(client)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during (kombu wraps redis-py's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_DEPTH:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _find(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    return next((e for e in _chain(exc) if isinstance(e, kind)), None)


def _says(exc: BaseException, *phrases: str) -> bool:
    text = " ".join(str(e) for e in _chain(exc)).lower()
    return any(p.lower() in text for p in phrases)


def _seconds(value: float | None) -> str:
    return "" if not value else f" within {value:g}s"


def _misconfigured(kind: str, at: Endpoint, message: str) -> errors.RedisMisconfigured:
    return errors.RedisMisconfigured(message, endpoint=at.where, kind=kind)


def _unavailable(kind: str, at: Endpoint, message: str) -> errors.StoreUnavailable:
    return errors.StoreUnavailable(message, endpoint=at.where, kind=kind)


def _tls(exc: BaseException, at: Endpoint) -> errors.StoreUnavailable | None:
    """TLS failures: an untrusted certificate, or TLS spoken to a port that does not speak it."""
    cert = _find(exc, ssl.SSLCertVerificationError)
    if isinstance(cert, ssl.SSLCertVerificationError):
        return _misconfigured(
            "tls_certificate",
            at,
            f"the TLS certificate of Redis at {at.where} is not trusted ({cert.verify_message}); "
            f"give its CA in {URL_SETTING} with ?ssl_ca_certs=/path/ca.pem",
        )
    if not at.tls:
        return None
    if _find(exc, ssl.SSLError) is not None:
        return _misconfigured(
            "tls_mismatch",
            at,
            f"the TLS handshake with {at.where} failed: the server does not speak TLS on that port; "
            f"use redis:// in {URL_SETTING}, or the port of its TLS listener",
        )
    if _says(exc, "handshake operation timed out"):
        # A plain Redis port waits for a command and never answers a TLS hello.
        return _unavailable(
            "tls_mismatch",
            at,
            f"the TLS handshake with {at.where} did not finish{_seconds(at.connect_timeout_s)}: the server "
            f"likely does not speak TLS on that port; use redis:// in {URL_SETTING}, or its TLS port",
        )
    return None


def _auth(exc: BaseException, at: Endpoint) -> errors.StoreUnavailable | None:
    denied = _find(exc, redis_errors.NoPermissionError)
    if denied is not None:
        return _misconfigured(
            "no_permission",
            at,
            f"the Redis user of {URL_SETTING} may not run a command reflexr needs on {at.where} (NOPERM); "
            "grant it the commands and keys of the fleet",
        )
    failed = _find(exc, (redis_errors.AuthenticationError, redis_errors.AuthenticationWrongNumberOfArgsError))
    if failed is None and not _says(exc, "NOAUTH", "WRONGPASS"):
        return None
    if _says(exc, "without any password configured"):
        fix = f"Redis at {at.where} has no password set, but {URL_SETTING} gives one; remove it from the URL"
    elif not at.has_password:
        fix = (
            f"Redis at {at.where} requires a password: give it in {URL_SETTING} as "
            f"redis://:PASSWORD@{at.where}/{at.db}"
        )
    else:
        fix = f"Redis at {at.where} rejected the password (or user name) in {URL_SETTING}; fix it"
    return _misconfigured("auth", at, fix)


def _probe(client: redis.Redis | None) -> redis.Redis | None:
    """A client of its own to ask the server something (database 0, short timeouts, no retry), so
    an answer comes fast or not at all; None for a cluster (no one server) or without a client."""
    if client is None or cluster.is_cluster(client):
        return None
    pool = client.connection_pool
    kwargs = {
        **pool.connection_kwargs,
        "db": 0,
        "socket_timeout": _PROBE_TIMEOUT_S,
        "socket_connect_timeout": _PROBE_TIMEOUT_S,
        "retry": Retry(NoBackoff(), 0),
    }
    try:
        # from_pool: the client owns its pool, so its close() closes the pool's connection too (a
        # client handed a pool leaves it open, and its socket to the garbage collector).
        return redis.Redis.from_pool(redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))
    except (redis_errors.RedisError, OSError, ValueError, TypeError):
        return None


def _database_count(client: redis.Redis | None) -> int | None:
    """How many databases the server has (CONFIG GET on database 0), or None if it will not say."""
    probe = _probe(client)
    if probe is None:  # a cluster has one database
        return None
    with contextlib.suppress(redis_errors.RedisError, OSError, ValueError, TypeError):
        try:
            found: dict[Any, Any] = probe.config_get("databases")
        finally:
            probe.close()
        for key, value in found.items():
            if _text(key) == "databases":
                return int(_text(value))
    return None


def memory_info(client: redis.Redis | None) -> dict[str, Any] | None:
    """The server's ``INFO memory`` (maxmemory and its policy), or None if it will not say (INFO
    refused, as managed Redis may; a cluster, whose nodes each have their own). Asked on the
    client's own pool: a full Redis still answers it, and no connection is opened for it."""
    if client is None or cluster.is_cluster(client):
        return None
    with contextlib.suppress(redis_errors.RedisError, OSError, ValueError, TypeError):
        return dict(client.info("memory"))
    return None


def _size(value: object) -> str:
    """Bytes as Redis's config writes them: 48mb, 2gb, 1500kb."""
    count = int(_text(value))
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size}{unit}"
    return f"{count}b"


def _full(at: Endpoint, info: Mapping[str, Any] | None) -> errors.StoreFull:
    """Redis refused a write at its maxmemory: what to do, with its figures when it gives them."""
    figures = " (its maxmemory and policy could not be read)"
    if info is not None:
        with contextlib.suppress(KeyError, ValueError):
            figures = f" (maxmemory {_size(info['maxmemory'])}, policy {_text(info['maxmemory_policy'])})"
    return errors.StoreFull(
        f"Redis at {at.where} is out of memory{figures}: free memory, raise maxmemory, or shorten "
        "retention (REFLEXR_RUN_RETENTION_S)",
        endpoint=at.where,
        kind="out_of_memory",
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _server_side(
    exc: BaseException, at: Endpoint, client: redis.Redis | None
) -> errors.StoreUnavailable | None:
    """Replies that say the URL points at the wrong thing: a database, a cluster, not Redis."""
    if _says(exc, "DB index is out of range"):
        count = _database_count(client)
        has = f" (it has {count}: 0 to {count - 1})" if count else ""
        return _misconfigured(
            "db_index",
            at,
            f"Redis at {at.where} has no database {at.db}{has}; change the /{at.db} at the end of "
            f"{URL_SETTING} (e.g. /0)",
        )
    if _says(exc, "SELECT is not allowed in cluster mode"):
        return _misconfigured(
            "cluster",
            at,
            f"Redis at {at.where} is a cluster node; reflexr needs a single primary (use /0, "
            "or a Redis that is not a cluster)",
        )
    if _find(exc, redis_errors.InvalidResponse) is not None:
        if _says(exc, "\\x15", "\x15"):  # a TLS alert record: the port speaks TLS
            return _misconfigured(
                "tls_mismatch", at, f"{at.where} speaks TLS; use rediss:// in {URL_SETTING}"
            )
        return _misconfigured(
            "not_redis",
            at,
            f"{at.where} answered, but not as a Redis server (protocol error); is {URL_SETTING} "
            "pointing at Redis?",
        )
    return None


def _replied(exc: BaseException, code: str) -> bool:
    """Whether the server's error reply starts with ``code`` (one redis-py has no class for)."""
    return any(
        isinstance(e, redis_errors.ResponseError)
        and (getattr(e, "status_code", None) == code or str(e).startswith(f"{code} "))
        for e in _chain(exc)
    )


def _state(
    exc: BaseException, at: Endpoint, memory: Mapping[str, Any] | None = None
) -> errors.StoreUnavailable | None:
    """A server that is there but cannot serve now: full, a replica, a restart, busy, a full client
    table. Each passes on its own (or once clients follow a failover): an outage, not a failure."""
    if _find(exc, redis_errors.OutOfMemoryError) is not None:
        return _full(at, memory)
    if _find(exc, redis_errors.ReadOnlyError) is not None:
        return _unavailable(
            "read_only",
            at,
            f"Redis at {at.where} is a read-only replica; point {URL_SETTING} at the primary "
            "(during a failover this passes once clients follow the new primary)",
        )
    if _says(exc, "NOREPLICAS"):
        # min-replicas-to-write: a primary cut off from its replicas refuses writes rather than
        # take ones a failover would discard (docs/design.md#redis-high-availability).
        return _unavailable(
            "no_replicas",
            at,
            f"Redis at {at.where} refuses writes: too few replicas acknowledge it (min-replicas-to-write); "
            "during a failover this passes once clients follow the new primary, otherwise bring a "
            "replica back",
        )
    if _find(exc, redis_errors.BusyLoadingError) is not None:
        return _unavailable(
            "loading", at, f"Redis at {at.where} is loading its data after a restart; retry in a moment"
        )
    if _replied(exc, "BUSY"):
        return _unavailable(
            "busy",
            at,
            f"Redis at {at.where} is busy running a script or module command past busy-reply-threshold; "
            "retry once it ends (SCRIPT KILL stops a script that writes nothing)",
        )
    if _says(exc, "max number of clients reached"):
        return _unavailable(
            "max_clients",
            at,
            f"Redis at {at.where} has reached its maxclients limit; raise maxclients or stop idle clients",
        )
    return _cluster_state(exc, at)


_CLUSTER_STATES: tuple[tuple[type[redis_errors.RedisError], str, str], ...] = (
    # MASTERDOWN first: redis-py's MasterDownError is a ClusterDownError.
    (
        redis_errors.MasterDownError,
        "master_down",
        "Redis at {where} has lost its link to its primary (MASTERDOWN); during a failover this passes "
        "once a replica is promoted, otherwise check the primary",
    ),
    (
        redis_errors.TryAgainError,
        "try_again",
        "{where} is moving the slot of these keys (TRYAGAIN); retry in a moment",
    ),
    (
        redis_errors.ClusterDownError,
        "cluster_down",
        "{where} cannot serve some of its slots now (CLUSTERDOWN); during a failover this passes once a "
        "replica is promoted, otherwise check the cluster's nodes",
    ),
)
"""A replica cut off from its primary, or a Redis Cluster without a primary for some slots (a
failover under way) or moving them: redis-py has already followed its slot map as far as it could."""


def _cluster_state(exc: BaseException, at: Endpoint) -> errors.StoreUnavailable | None:
    for kind_of_error, kind, message in _CLUSTER_STATES:
        if _find(exc, kind_of_error) is not None:
            return _unavailable(kind, at, message.format(where=at.where))
    return None


def server_state(exc: BaseException) -> str | None:
    """The kind of a state the server is in that passes on its own (full, loading, busy, a replica,
    a cluster failing over), for code that meets redis-py's errors outside the store (kombu's
    transport); None for any other error."""
    found = _state(exc, Endpoint())
    return None if found is None or isinstance(found, errors.RedisMisconfigured) else found.kind


def _network(exc: BaseException, at: Endpoint) -> errors.StoreUnavailable | None:
    """The connection itself failed: refused, unresolvable, timed out, closed."""
    if _find(exc, ConnectionRefusedError) is not None:
        return _unavailable(
            "refused",
            at,
            f"cannot connect to Redis at {at.where} (connection refused): start redis-server there, "
            f"or fix the host and port in {URL_SETTING}",
        )
    if _find(exc, socket.gaierror) is not None:
        return _unavailable(
            "dns", at, f"cannot resolve the Redis host {at.host!r}; fix the host in {URL_SETTING}"
        )
    if _find(exc, redis_errors.TimeoutError) is not None or _find(exc, TimeoutError) is not None:
        connecting = _says(exc, "connecting")
        limit = at.connect_timeout_s if connecting else at.read_timeout_s
        return _unavailable(
            "timeout",
            at,
            f"Redis at {at.where} did not answer{_seconds(limit)}: check the host and port in "
            f"{URL_SETTING}, and that nothing (a firewall, a VPN) blocks the way",
        )
    if _find(exc, ConnectionResetError) is not None or _says(exc, "closed by server"):
        if not at.tls and _speaks_tls(at):
            # A TLS port drops a plaintext client at once; say so rather than "retry".
            return _misconfigured(
                "tls_mismatch", at, f"{at.where} speaks TLS; use rediss:// in {URL_SETTING}"
            )
        return _unavailable("closed", at, f"Redis at {at.where} closed the connection; retry once it is back")
    return None


def _speaks_tls(at: Endpoint) -> bool:
    """Whether a TLS handshake with the endpoint completes (certificates unchecked: only asking)."""
    if at.port is None:
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((at.host, at.port), timeout=_PROBE_TIMEOUT_S) as sock,
            context.wrap_socket(sock, server_hostname=at.host),
        ):
            return True
    except OSError:  # includes ssl.SSLError and timeouts
        return False


def translate(
    exc: BaseException,
    at: Endpoint,
    client: redis.Redis | None = None,
    memory: Mapping[str, Any] | None = None,
) -> errors.StoreUnavailable | None:
    """The StoreUnavailable (or RedisMisconfigured) that explains ``exc``; None if it is another error.

    ``client`` lets a wrong database number be reported with the server's database count, and a
    full Redis with its maxmemory and policy (``memory``: its ``INFO memory``, when the caller has it).
    """
    if _find(exc, (redis_errors.RedisError, *_SOCKET_ERRORS)) is None:
        return None
    for rule in (_tls, _auth):
        found = rule(exc, at)
        if found is not None:
            return found
    if memory is None and _find(exc, redis_errors.OutOfMemoryError) is not None:
        memory = memory_info(client)
    found = _state(exc, at, memory)
    if found is not None:
        return found
    found = _server_side(exc, at, client) or _network(exc, at)
    if found is not None:
        return found
    if _find(exc, (redis_errors.ConnectionError, *_SOCKET_ERRORS)) is not None:
        return _unavailable(
            "unavailable",
            at,
            f"Redis at {at.where} could not be reached ({type(exc).__name__}); check {URL_SETTING}, "
            "and retry once the server is back",
        )
    return None
