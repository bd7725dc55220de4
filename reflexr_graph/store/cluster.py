"""``redis+cluster://`` URLs: the store on a Redis Cluster (``rediss+cluster://`` over TLS).

The form is ``redis+cluster://[[user]:password@]host:port[,host:port...]``: the hosts are some
nodes of the cluster, tried in order to learn the rest (redis-py's ``RedisCluster`` follows
its slot map from there, and again after a failover or a resharding). There is no database
number: a cluster has one database.

Every script of the store touches the keys of one slot (store/keys.py), so it runs on the
primary of that slot. The broker cannot be on the cluster (kombu has no cluster transport),
so a cluster store needs ``REFLEXR_BROKER_URL`` (config/settings.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from reflexr_graph.errors import SettingsError
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Scan, ScanCursor

SCHEME = "redis+cluster"
TLS_SCHEME = "rediss+cluster"
SCHEMES = (SCHEME, TLS_SCHEME)
_EXAMPLE = f"{SCHEME}://:password@10.0.0.1:6379,10.0.0.2:6379"


class ClusterURLError(SettingsError):
    """A ``redis+cluster://`` URL that cannot be used; the message never holds its password."""


@dataclass(frozen=True)
class ClusterAddress:
    """Some nodes of the cluster, and how to log in to its nodes."""

    nodes: tuple[tuple[str, int], ...]
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def client_kwargs(self) -> dict[str, Any]:
        return {
            **({"username": self.username} if self.username else {}),
            **({"password": self.password} if self.password else {}),
            **({"ssl": True} if self.tls else {}),
        }


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in SCHEMES


def _host_port(part: str) -> tuple[str, int]:
    host, sep, port = part.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterURLError(f"a cluster node is not host:port, e.g. {_EXAMPLE}")
    return host.strip("[]"), int(port)


def parse(url: str) -> ClusterAddress:
    """The nodes a ``redis+cluster://`` URL names, or ClusterURLError saying what to fix."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ClusterURLError(f"not a {SCHEME}:// URL (scheme {parts.scheme!r})")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    nodes = tuple(_host_port(h) for h in hosts.split(",") if h)
    if not nodes:
        raise ClusterURLError(f"{parts.scheme}:// needs at least one node as host:port, e.g. {_EXAMPLE}")
    if parts.path.strip("/") or parts.query:
        raise ClusterURLError(
            f"{parts.scheme}:// takes no database or options (a cluster has one database), e.g. {_EXAMPLE}"
        )
    username, _, password = userinfo.partition(":")
    return ClusterAddress(
        nodes=nodes,
        tls=parts.scheme == TLS_SCHEME,
        username=unquote(username) or None,
        password=unquote(password) or None,
    )


def client(url: str, **options: Any) -> redis.Redis:
    """A blocking ``RedisCluster`` of ``url``'s cluster.

    Typed as ``redis.Redis``: the store calls only the commands, scripts and pipelines the two
    share, each on keys of one slot.
    """
    address = parse(url)
    nodes = [redis.cluster.ClusterNode(host, port) for host, port in address.nodes]  # type: ignore[no-untyped-call]
    found = redis.cluster.RedisCluster(startup_nodes=nodes, **{**options, **address.client_kwargs()})
    return cast(redis.Redis, found)


def async_client(url: str, **options: Any) -> redis.asyncio.Redis:
    """The same as :func:`client`, on redis.asyncio (the AsyncClient's store)."""
    address = parse(url)
    nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in address.nodes]
    found = redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **{**options, **address.client_kwargs()})
    return cast(redis.asyncio.Redis, found)


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a cluster client (made by :func:`client` or :func:`async_client`)."""
    return isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster)


def shards(client: object) -> keys.Shards:
    """How a store on ``client`` shards its indexes: over :data:`keys.SHARDS` on a cluster, so each
    primary holds its part; in one on a standalone or Sentinel-managed Redis, where one script may
    touch any key, so a listing or a reaper pass costs what it would unsharded. The one place this
    is decided: a client's kind follows its URL's (``store/connect.py``), so every process on one
    store agrees."""
    return keys.CLUSTER if is_cluster(client) else keys.STANDALONE


def connection_kwargs(client: Any) -> dict[str, Any]:
    """The options each connection of ``client`` is made with, whichever kind of client it is."""
    if isinstance(client, redis.cluster.RedisCluster):
        return dict(client.nodes_manager.connection_kwargs)
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        return dict(client.connection_kwargs)
    return dict(client.connection_pool.connection_kwargs)


_NodePages = tuple[dict[str, int], list[Any]]
"""A cluster's SCAN reply (redis-py): each primary's next cursor, by node name, and their keys."""


def scan_page(client: redis.Redis, page: Scan) -> tuple[ScanCursor, list[Any]]:
    """One page of a walk over the keyspace (``ops.Scan``) on ``client``, and the cursor of the next.

    On one server, one SCAN. On a cluster, whose primaries each hold their own keys, the first page
    is every primary's first (one SCAN each, as redis-py sends it), and each later page the next of
    one primary not done yet, named in the cursor, as redis-py's ``scan_iter`` walks them.
    """
    if not is_cluster(client):
        assert isinstance(page.cursor, int)
        cursor, found = client.scan(page.cursor, match=page.match, count=page.count)
        return int(cursor), list(found)
    nodes = cast(redis.cluster.RedisCluster, client)
    if not page.cursor:
        cursors, found = cast(_NodePages, nodes.scan(match=page.match, count=page.count))
        return tuple((name, int(at)) for name, at in cursors.items() if int(at)), list(found)
    assert isinstance(page.cursor, tuple)
    (name, at), *rest = page.cursor
    node = nodes.get_node(node_name=name)  # type: ignore[no-untyped-call]
    if node is None:  # a failover replaced it: its walk cannot go on from its cursor
        raise redis.exceptions.ConnectionError(f"cluster node {name} left during a walk of the keyspace")
    cursors, found = cast(
        _NodePages, nodes.scan(cursor=at, match=page.match, count=page.count, target_nodes=node)
    )
    left = int(cursors[name])
    return (((name, left), *rest) if left else tuple(rest)), list(found)
