"""A Redis primary, one replica and one Redis Sentinel, all private to a test, on free ports.

One sentinel with quorum 1 can agree with itself, so it fails over alone; production runs three
(deploy/redis/sentinel.conf). The primary and replica are ``RedisServer``s (AOF on, as in
production); the sentinel is ``redis-sentinel`` (Debian's package) or ``redis-server --sentinel``.
Every process is stopped by its own handle at :meth:`SentinelTopology.close`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from reflexr_graph.local_processes import free_port
from tests.redis_server import NO_RETRY, RedisServer
from tests.waiting import wait_for

MASTER = "reflexr"
DOWN_AFTER_MS = 1000
"""How long the primary must be silent before the sentinel calls it down (production: 5000+)."""
FAILOVER_TIMEOUT_MS = 10_000
TIMERS = ("info-period", "1000", "publish-period", "500", "tilt-period", "2000")
"""``SENTINEL DEBUG`` timers, so that a demotion does not wait on a loaded machine. A sentinel demotes
a primary that comes back (``+convert-to-slave``) only on an INFO reply (every 10 s by default)
that arrives 4 publish periods (8 s) after the role it reports changed; and a sentinel whose event
loop stalls for 2 s (a slow fsync of its config, no CPU) enters TILT and acts on nothing for 30 s.
Under load, one stall or a few missed INFO rounds used to take the demotion past a minute. With
these it takes about 3 s, and a stall costs 2 s more."""
SAFETY = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2")
"""deploy/redis/redis.conf's HA settings: a primary with no replica acknowledging it within 2 s
refuses writes, so a primary cut off by a partition takes none that the failover would discard."""
SYNC_NOW = ("--repl-diskless-sync-delay", "0")
"""A primary starts a replica's full sync at once, not after Redis's default 5 s wait for more replicas
to share it (there is one): at the start, and when the old primary comes back as the new one's
replica, during which the new primary (min-replicas-to-write) refuses writes."""


def _role(client: redis.Redis) -> str | None:
    with contextlib.suppress(redis.RedisError):
        return str(client.info("replication").get("role"))
    return None


def _sentinel_argv(conf: Path) -> list[str]:
    binary = shutil.which("redis-sentinel")
    if binary is not None:
        return [binary, str(conf)]
    server = shutil.which("redis-server")
    if server is None:
        raise RuntimeError("neither redis-sentinel nor redis-server is on PATH; run `make sentinel`")
    return [server, str(conf), "--sentinel"]


class SentinelTopology:
    """Primary + replica + sentinel; :attr:`url` is the ``redis+sentinel://`` URL of the pair."""

    def __init__(self, *, safety: bool = True) -> None:
        """``safety=False`` leaves out :data:`SAFETY`, to measure what it prevents."""
        self.safety = SAFETY if safety else ()
        self.primary = RedisServer(extra_args=(*SYNC_NOW, *self.safety))
        self.replica: RedisServer | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="reflexr-sentinel-"))
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{MASTER}/0"

    def start(self) -> SentinelTopology:
        self.primary.start()
        self.replica = RedisServer(
            extra_args=(*SYNC_NOW, *self.safety, "--replicaof", "127.0.0.1", str(self.primary.port))
        )
        self.replica.start()
        wait_for(self._replica_in_sync, 30, "the replica to sync with the primary")
        if self.safety:
            wait_for(self._primary_takes_writes, 30, "the primary to count its replica as good")
        conf = self.dir / "sentinel.conf"
        # The sentinel rewrites its config file as it learns the topology, so it must be writable.
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir / 'sentinel.log'}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        with (self.dir / "stderr.log").open("wb") as err:
            self._proc = subprocess.Popen(
                _sentinel_argv(conf), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        wait_for(lambda: self.primary_port() == self.primary.port, 30, "the sentinel to see the primary")
        with self.sentinel() as s:
            s.execute_command("SENTINEL", "DEBUG", *TIMERS)
        wait_for(self._sentinel_knows_replica, 30, "the sentinel to discover the replica")
        return self

    @property
    def sentinel_pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def sentinel(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, retry=NO_RETRY)

    def primary_port(self) -> int | None:
        with contextlib.suppress(redis.RedisError), self.sentinel() as s:
            addr = s.sentinel_get_master_addr_by_name(MASTER)
            return int(addr[1]) if addr else None
        return None

    def _sentinel_knows_replica(self) -> bool:
        with contextlib.suppress(redis.RedisError), self.sentinel() as s:
            return bool(s.sentinel_slaves(MASTER))
        return False

    def _replica_in_sync(self) -> bool:
        assert self.replica is not None
        with contextlib.suppress(redis.RedisError), self.replica.client() as c:
            return c.info("replication").get("master_link_status") == "up"
        return False

    def _primary_takes_writes(self) -> bool:
        """The primary counts the replica as acknowledging it: a link that is up but whose first
        acknowledgement is late (a loaded machine) still leaves writes refused with NOREPLICAS."""
        with contextlib.suppress(redis.RedisError), self.primary.client() as c:
            return int(c.info("replication").get("min_slaves_good_slaves", 0)) >= 1
        return False

    def kill_primary(self) -> int:
        """SIGKILL the primary (no shutdown, nothing more replicated); the sentinel promotes the
        replica, and the old primary is restarted as its replica. Returns the new primary's port."""
        assert self.replica is not None
        self.primary.kill()
        new = self.replica.port
        wait_for(lambda: self.primary_port() == new, 60, "the sentinel to promote the replica")
        # Restarted as a supervisor that asks the sentinels first does (a primary restarted as one
        # would only be demoted by the sentinel some INFO rounds later): a replica of the new
        # primary, which (min-replicas-to-write 1) takes writes again once it has one.
        self.primary.extra_args = (*SYNC_NOW, *self.safety, "--replicaof", "127.0.0.1", str(new))
        self.primary.start()
        with self.primary.client() as old:
            wait_for(lambda: _role(old) == "slave", 60, "the old primary to follow the new one")
        return new

    def stall_primary(self) -> int:
        """SIGSTOP the primary until the sentinel promotes the replica, then SIGCONT it: a partition.

        Woken, the old primary still takes writes from the clients connected to it until the
        sentinel turns it into a replica of the new one, which discards them: the split-brain
        window asynchronous replication leaves. Returns the new primary's port once the old one
        follows it."""
        assert self.replica is not None
        pid = self.primary.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            new = self.replica.port
            wait_for(lambda: self.primary_port() == new, 60, "the sentinel to promote the replica")
        finally:
            os.kill(pid, signal.SIGCONT)
        with self.primary.client() as old:
            wait_for(lambda: _role(old) == "slave", 60, "the old primary to follow the new one")
        return new

    def fail_over(self) -> int:
        """A failover the sentinel runs by itself (``SENTINEL FAILOVER``): the replica is promoted and
        the primary, still up, is turned into its replica. Returns the new primary's port once the
        old one follows it."""
        assert self.replica is not None
        new = self.replica.port
        wait_for(self._failover_begun, 30, "the sentinel to begin a failover")
        wait_for(lambda: self.primary_port() == new, 60, "the sentinel to promote the replica")
        with self.primary.client() as old:
            wait_for(lambda: _role(old) == "slave", 60, "the old primary to follow the new one")
        return new

    def _failover_begun(self) -> bool:
        """Ask for a failover; False while the sentinel refuses it for now: it has not yet judged
        the replica fit to promote (``NOGOODSLAVE``, on a loaded machine just after the start)."""
        with self.sentinel() as s:
            try:
                s.execute_command("SENTINEL", "FAILOVER", MASTER)
            except redis.ResponseError as exc:
                if str(exc).startswith("NOGOODSLAVE"):
                    return False
                raise
        return True

    def new_primary(self) -> redis.Redis:
        assert self.replica is not None
        return self.replica.client()

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
            self._proc = None
        for server in (self.replica, self.primary):
            if server is not None:
                server.close()
        shutil.rmtree(self.dir, ignore_errors=True)
