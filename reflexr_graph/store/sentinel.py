"""``redis+sentinel://`` URLs: a Redis primary found through Redis Sentinel.

The form is ``redis+sentinel://[[user]:password@]host:port[,host:port...]/master[/db]``, with an
optional ``?sentinel_password=...`` for sentinels that require AUTH themselves. The user and
password are the primary's (and its replicas'); the hosts are the sentinels, tried in order.

The store, the clients and the broker all reach the primary through the sentinels, so a
failover moves every connection to the new primary: redis-py's sentinel-managed connections
drop a connection whose server became a replica (``READONLY``) and ask the sentinels again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qs, quote, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

from reflexr_graph.errors import SettingsError

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
KNOWN_OPTIONS = ("sentinel_password",)


class SentinelURLError(SettingsError):
    """A ``redis+sentinel://`` URL that cannot be used; the message never holds its password.

    A SettingsError (so a ValueError too): the URL is a setting, or the ``--redis-url`` given for one.
    """


@dataclass(frozen=True)
class SentinelAddress:
    """Where the sentinels are, which primary they watch, and how to log in to it."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)

    def sentinel_kwargs(self) -> dict[str, Any]:
        """What redis-py's ``Sentinel(sentinel_kwargs=...)`` needs to talk to the sentinels."""
        return {"password": self.sentinel_password} if self.sentinel_password else {}

    def master_kwargs(self) -> dict[str, Any]:
        return {
            "db": self.db,
            **({"username": self.username} if self.username else {}),
            **({"password": self.password} if self.password else {}),
        }

    def kombu_url(self) -> str:
        """kombu's spelling: ``sentinel://:pw@h1:p1;sentinel://:pw@h2:p2/db`` (its SentinelTransport)."""
        auth = ""
        if self.password:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password, safe='')}@"
        hosts = [f"sentinel://{auth}{host}:{port}" for host, port in self.sentinels]
        hosts[-1] += f"/{self.db}"
        return ";".join(hosts)

    def kombu_transport_options(self) -> dict[str, Any]:
        return {"master_name": self.master, "sentinel_kwargs": self.sentinel_kwargs()}


def is_sentinel_url(url: str) -> bool:
    return urlsplit(url).scheme == SCHEME


def _host_port(part: str) -> tuple[str, int]:
    host, sep, port = part.rpartition(":")
    if not sep:
        host, port = part, str(DEFAULT_SENTINEL_PORT)
    if not host or not port.isdigit():
        raise SentinelURLError("a sentinel address is not host:port, e.g. 10.0.0.5:26379")
    return host.strip("[]"), int(port)


def parse(url: str) -> SentinelAddress:
    """The address a ``redis+sentinel://`` URL names, or SentinelURLError saying what to fix."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise SentinelURLError(f"not a {SCHEME}:// URL (scheme {parts.scheme!r})")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    if not hosts:
        raise SentinelURLError(f"{SCHEME}:// needs at least one sentinel, e.g. {SCHEME}://h1:26379/mymaster")
    username, _, password = userinfo.partition(":")
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise SentinelURLError(
            f"{SCHEME}:// needs the primary's name, then optionally the db: "
            f"{SCHEME}://h1:26379,h2:26379/mymaster/0"
        )
    options = parse_qs(parts.query)
    unknown = sorted(set(options) - set(KNOWN_OPTIONS))
    if unknown:
        raise SentinelURLError(
            f"unknown {SCHEME}:// option(s) {', '.join(unknown)}; known: {', '.join(KNOWN_OPTIONS)}"
        )
    sentinel_password = options.get("sentinel_password", [None])[-1]
    return SentinelAddress(
        sentinels=tuple(_host_port(h) for h in hosts.split(",") if h),
        master=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=sentinel_password or None,
    )


def _sentinel_side(options: dict[str, Any]) -> dict[str, Any]:
    # The sentinels get the same timeouts as the primary: a dead sentinel must not hang a call.
    keep = ("socket_timeout", "socket_connect_timeout")
    return {k: options[k] for k in keep if k in options}


def client(url: str, **options: Any) -> redis.Redis:
    """A blocking client of the primary that ``url`` names, found (and found again) through Sentinel."""
    address = parse(url)
    sentinel = redis.sentinel.Sentinel(
        list(address.sentinels),
        sentinel_kwargs={**address.sentinel_kwargs(), **_sentinel_side(options)},
    )
    master = sentinel.master_for(address.master, **{**options, **address.master_kwargs()})
    return cast(redis.Redis, master)


def async_client(url: str, **options: Any) -> redis.asyncio.Redis:
    """The same as :func:`client`, on redis.asyncio (the AsyncClient's store)."""
    address = parse(url)
    sentinel = redis.asyncio.sentinel.Sentinel(
        list(address.sentinels),
        sentinel_kwargs={**address.sentinel_kwargs(), **_sentinel_side(options)},
    )
    master = sentinel.master_for(address.master, **{**options, **address.master_kwargs()})
    return cast(redis.asyncio.Redis, master)


def _sentinel_clients(client: Any) -> list[Any]:
    # A Sentinel-managed pool keeps the Sentinel that found its primary, and that keeps one
    # client per sentinel: closing the primary's client closes neither.
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    return list(getattr(manager, "sentinels", ()))


def close_sentinels(client: redis.Redis) -> None:
    """Close the connections to the sentinels behind ``client`` (none for a plain URL's client)."""
    for sentinel in _sentinel_clients(client):
        sentinel.close()


async def aclose_sentinels(client: redis.asyncio.Redis) -> None:
    """:func:`close_sentinels` for a redis.asyncio client."""
    for sentinel in _sentinel_clients(client):
        await sentinel.aclose()
