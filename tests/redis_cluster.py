"""A private Redis Cluster for tests: redis-server processes with ``cluster-enabled yes`` on free
loopback ports, joined by ``redis-cli --cluster create``.

Each node is a :class:`RedisServer` (its own data dir, log and pid) with its cluster bus on a
port of its own (``cluster-port``): the default bus port, the client port + 10000, can lie past
65535 for an ephemeral port, or be taken.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field

import redis

from reflexr_graph.local_processes import free_port
from tests.redis_server import NO_RETRY, RedisServer, RedisServerError

READY_TIMEOUT_S = 30.0
NODE_TIMEOUT_MS = 2000
"""How long a node may stay silent before the others take it for failed (a replica's promotion
waits about this long)."""


def _redis_cli() -> str:
    path = shutil.which("redis-cli")
    if path is None:
        raise RedisServerError("redis-cli not found on PATH; it creates the test cluster")
    return path


def _node(extra: tuple[str, ...]) -> RedisServer:
    args = (
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        "--cluster-port", str(free_port()),
        # A replica syncs at once, so one is ready to take over as soon as the cluster is.
        "--repl-diskless-sync-delay", "0",
    )  # fmt: skip
    return RedisServer(extra_args=(*args, *extra))


@dataclass
class RedisCluster:
    """``primaries`` primaries, each with ``replicas`` replicas; :meth:`start` returns once every node
    says ``cluster_state:ok`` and knows every other."""

    primaries: int = 3
    replicas: int = 0
    extra_args: tuple[str, ...] = ()
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The store URL naming every node (redis-py needs one to find the rest)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> RedisCluster:
        count = self.primaries * (1 + self.replicas)
        self.nodes = [_node(self.extra_args) for _ in range(count)]
        try:
            for node in self.nodes:
                node.start()
            addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
            subprocess.run(
                [_redis_cli(), "--cluster", "create", *addresses,
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                check=True, capture_output=True, timeout=READY_TIMEOUT_S,
            )  # fmt: skip
            self.wait_ok()
        except BaseException:
            self.close()
            raise
        return self

    def wait_ok(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until every running node reports the cluster ok, with every slot served."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._ok(n) for n in self.nodes if n.running):
                return
            time.sleep(0.05)  # the poll's interval, not the wait itself
        raise RedisServerError(f"the test cluster was not ok within {timeout:g}s: {self.nodes}")

    def _ok(self, node: RedisServer) -> bool:
        """The node sees the whole cluster ok, and, a replica, has synced with its primary (until
        then it could not take over)."""
        try:
            with redis.Redis(port=node.port, socket_timeout=1.0, retry=NO_RETRY) as r:
                info = r.cluster("info")
                replication = r.info("replication")
        except redis.RedisError:
            return False
        synced = replication["role"] == "master" or replication.get("master_link_status") == "up"
        return (
            synced
            and info.get("cluster_state") == "ok"
            and int(info.get("cluster_slots_ok", 0)) == 16384
            and int(info.get("cluster_known_nodes", 0)) == len(self.nodes)
        )

    def client(self) -> redis.RedisCluster:
        """A redis-py cluster client of this cluster (tests read keys with it)."""
        return redis.RedisCluster(host="127.0.0.1", port=self.nodes[0].port)

    def primary_nodes(self) -> list[RedisServer]:
        """The nodes that are primaries now."""
        found = []
        for node in self.nodes:
            if not node.running:
                continue
            with redis.Redis(port=node.port, socket_timeout=1.0, retry=NO_RETRY) as r:
                if r.info("replication")["role"] == "master":
                    found.append(node)
        return found

    def flush(self) -> None:
        """Empty every primary (a replica follows its own)."""
        for node in self.primary_nodes():
            with redis.Redis(port=node.port) as r:
                r.flushall()

    def close(self) -> None:
        for node in self.nodes:
            node.close()
