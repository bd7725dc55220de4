"""The store on a Redis Cluster: what a run costs each primary, with 1 primary and with 3, and what a
fanned-out listing costs against a single store.

**Per run, per primary.** Two clusters, side by side in the same run on this machine (measured one
after the other), started by the benchmark (:class:`LocalCluster`): one of 1 primary holding every
slot, and one of 3 primaries holding a third of the slots each; no replicas, AOF with ``everysec``
as the lab's Redis. Both are a ``redis+cluster://`` store, so both run the same code (64 shards, a
script per slot); the 1-primary cluster is the baseline, all of the fleet's store work on one core.
The broker is the lab's standalone Redis, and one fleet worker (``-c 2``) runs ``five_steps`` runs
enqueued by a ``Client``. On the 3-primary cluster a batch of runs is sent to the shards of each
primary in turn, then a batch spread over every shard (run i in shard i mod 64, as many runs would
be); on the 1-primary cluster that spread batch. Every run has an idempotency key, chosen so its id
lies in the shards wanted (a keyed run's id is in its key's shard). Around each batch, ``CONFIG
RESETSTAT`` and ``INFO commandstats`` on every primary give the commands it ran (those inside Lua
included) and ``INFO cpu`` its CPU time (user + sys). The fleet's background is taken out: its
reaper passes over every shard every 10 s when idle, a burst of a few hundred commands on each
primary, so each batch starts right after a pass the benchmark nudges, and is tried again if it
lasted long enough for the next to fall in it, or if a worker's presence beat (every 10 s) fell
in it while it looked in every shard for held runs; between passes the primaries serve a few
commands a second (worker presence, on the control slot's primary) and spend CPU on their own
cron and the cluster bus, measured for ``idle_s`` just before the batch and subtracted. The batch
ends when the worker's log says every run of it succeeded, so the benchmark itself sends the
cluster nothing while a batch runs.

**Listing.** The same runs (``local_store.fill``: finished, dead and waiting ones) are loaded into
a standalone Redis and into the 3-primary cluster; ``runs`` (the newest 50) and ``dlq list`` are
measured on each, by their commands (summed over the primaries) and their wall time.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import redis
from redis.crc import key_slot

from bench.fleet_graph import five_steps
from bench.procs import BenchError, Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.local_processes import Worker, free_port
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.local_store import Mix, fill
from reflexr_graph.store import keys

QUEUE = "bench-cluster"
SLOTS = 16384
CONCURRENCY = 2
TARGET_SHARE = 0.40
"""The busiest of 3 primaries does at most this share of the store's commands."""
TARGET_FOREIGN = 0.5
"""Commands per run at most on a primary that holds none of the batch's runs: about none."""
LIST_REPS = 9
OWN_COMMANDS = ("cmdstat_config", "cmdstat_info")
"""What the benchmark itself sends each primary (``config|resetstat`` too), left out of every count."""
PASS_FREE_S = 8.0
"""A batch over within this of a reaper pass has no pass in it: an idle reaper passes every 10 s
(reaper.py: IDLE_MAX_S), and a five-step run makes nothing due that would wake it sooner."""
PRESENCE_SCAN = "cmdstat_srandmember"
"""Only a worker's presence beat (every 10 s, not in step with the reaper's pass) sends this: for
each graph it serves whose version a hold has marked, it looks in every shard for runs held for it
(fleet/versions.py: wake_held). A batch with one in it is tried again; an idle beat reads the
control slot only."""
ATTEMPTS = 4
QUIET_COMMANDS = 5
"""A reaper pass is over once no primary runs this many commands in ``idle_s`` (the control slot's
primary serves a few a second for worker presence)."""
SUCCEEDED_LINE = "] succeeded in "
"""Celery's log line for a task that returned: the fleet task returns once the run succeeded."""


@dataclass
class LocalCluster:
    """``primaries`` redis-server processes with ``cluster-enabled yes``, each given an equal range
    of the slots, then met: a cluster of 1 primary too, which ``redis-cli --cluster create``
    refuses to build."""

    primaries: int
    nodes: list[RedisServer] = field(default_factory=list)
    bus_ports: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def first_slot(self, i: int) -> int:
        return i * SLOTS // self.primaries

    def owner(self, key: str) -> int:
        """The index of the primary that holds ``key``."""
        slot = key_slot(key.encode())
        return max(i for i in range(self.primaries) if self.first_slot(i) <= slot)

    def start(self) -> LocalCluster:
        """Start and join the nodes; :meth:`wait_ok` waits until they serve (a primary of a cluster
        waits 2 s after it starts before it serves anything)."""
        for _ in range(self.primaries):
            # A bus port of its own: the default, the port + 10000, may be past 65535 or taken.
            self.bus_ports.append(free_port())
            args = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-port", str(self.bus_ports[-1]))  # fmt: skip
            self.nodes.append(RedisServer(appendfsync="everysec", extra_args=args).start())
        for i, node in enumerate(self.nodes):
            with node.client() as r:
                r.execute_command("CLUSTER", "ADDSLOTSRANGE", self.first_slot(i), self.first_slot(i + 1) - 1)
                r.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        with self.nodes[0].client() as r:
            for node, bus_port in zip(self.nodes[1:], self.bus_ports[1:], strict=True):
                r.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus_port)
        return self

    def wait_ok(self) -> None:
        wait_for(lambda: all(self._ok(n) for n in self.nodes), 30, "the cluster to be ok")

    def _ok(self, node: RedisServer) -> bool:
        with node.client() as r:
            info = r.execute_command("CLUSTER", "INFO").decode()
        fields = dict(line.split(":", 1) for line in info.split() if ":" in line)
        return fields.get("cluster_state") == "ok" and fields.get("cluster_known_nodes") == str(
            self.primaries
        )

    def flush(self) -> None:
        for node in self.nodes:
            with node.client() as r:
                r.flushall()

    def close(self) -> None:
        for node in self.nodes:
            node.close()


@contextlib.contextmanager
def local_cluster(primaries: int) -> Iterator[LocalCluster]:
    cluster = LocalCluster(primaries)
    try:
        yield cluster.start()
    finally:
        cluster.close()


@dataclass(frozen=True)
class Usage:
    """What one primary did over a window: commands (Lua's included) and CPU µs."""

    commands: float
    cpu_us: float


def _cpu_us(r: redis.Redis) -> float:
    cpu: dict[str, Any] = r.info("cpu")
    return (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e6


def _commands(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return sum(int(s["calls"]) for name, s in stats.items() if not name.startswith(OWN_COMMANDS))


def _calls(r: redis.Redis, command: str) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return int(stats.get(command, {}).get("calls", 0))


def _window(primaries: list[redis.Redis], fn: Callable[[], object]) -> tuple[list[Usage], float]:
    """Each primary's usage while ``fn`` runs, and the seconds it took."""
    for r in primaries:
        r.config_resetstat()
    cpu0 = [_cpu_us(r) for r in primaries]
    t0 = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t0
    return [Usage(_commands(r), _cpu_us(r) - c0) for r, c0 in zip(primaries, cpu0, strict=True)], elapsed


@dataclass(frozen=True)
class Batch:
    """Per run of a batch, on each primary, net of that primary's background."""

    held_by: int | None
    """The primary whose shards hold every run of the batch; None: spread over every shard."""
    per_run: list[Usage]
    clean: bool
    """It ended within :data:`PASS_FREE_S` of the reaper's pass before it, so no pass fell in it,
    and no presence beat did either (:data:`PRESENCE_SCAN`)."""


@dataclass
class Fleet:
    """One worker on a cluster store, and a client that enqueues runs into chosen shards."""

    cluster: LocalCluster
    client: Client
    worker: Worker
    primaries: list[redis.Redis]
    idle_s: float
    background: list[Usage] = field(default_factory=list)
    """Per second, per primary, measured just before the latest batch, after the reaper's pass."""
    pass_commands: list[int] = field(default_factory=list)
    """Each primary's commands in the latest reaper pass (one every 10 s when idle)."""

    def keys_for(self, n: int, held_by: int | None) -> list[str]:
        """``n`` fresh idempotency keys whose runs go round the shards of primary ``held_by`` (of every
        primary if None) in turn, as many runs would by the law of large numbers."""
        shards = [s for s in keys.CLUSTER.all if held_by in (None, self.cluster.owner(keys.due(s)))]
        tag, j = uuid.uuid4().hex[:8], 0
        pool: dict[int, list[str]] = {}
        found: list[str] = []
        for shard in (shards[i % len(shards)] for i in range(n)):
            while not pool.get(shard):
                key, j = f"{tag}-{j}", j + 1
                pool.setdefault(keys.shard_of(keys.idem_scope(five_steps.name, key)), []).append(key)
            found.append(pool[shard].pop())
        return found

    def succeeded(self) -> int:
        return self.worker.log().count(SUCCEEDED_LINE)

    def run_batch(self, idem_keys: list[str]) -> None:
        target = self.succeeded() + len(idem_keys)
        for key in idem_keys:
            self.client.enqueue(five_steps.name, 0, idempotency_key=key)
        # The log, not the store: polling the cluster would count as the runs' work.
        wait_for(lambda: self.succeeded() >= target, 300, "the batch to succeed", poll_s=0.02)

    def reaper_pass(self) -> list[int]:
        """Nudge the worker's reaper into its pass over every shard now, and wait until the pass is
        over and the primaries are quiet for ``idle_s``: that window is the background measured
        (:attr:`background`). The reaper's next pass is then about 10 s away (``IDLE_MAX_S``), after
        the batch that follows. Each primary's commands in the pass."""
        shards = [
            sum(1 for s in keys.CLUSTER.all if self.cluster.owner(keys.due(s)) == i)
            for i in range(len(self.primaries))
        ]
        for r in self.primaries:
            r.config_resetstat()
        self.client.store.nudge_reaper()
        wait_for(
            lambda: all(_commands(r) >= n for r, n in zip(self.primaries, shards, strict=True)),
            30,
            "a reaper pass",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = [(_commands(r), _cpu_us(r)) for r in self.primaries]
            t0 = time.perf_counter()
            time.sleep(self.idle_s)  # a window, not a wait: the pass is over if it stays quiet
            after = [(_commands(r), _cpu_us(r)) for r in self.primaries]
            elapsed = time.perf_counter() - t0
            if all(a[0] - b[0] < QUIET_COMMANDS for a, b in zip(after, before, strict=True)):
                self.background = [
                    Usage((a[0] - b[0]) / elapsed, (a[1] - b[1]) / elapsed)
                    for a, b in zip(after, before, strict=True)
                ]
                return [b[0] for b in before]
        raise BenchError("the primaries never went quiet after a reaper pass")

    def measure(self, n: int, held_by: int | None) -> Batch:
        """A batch of ``n`` runs between two reaper passes; tried again (with new runs) when it ended
        too late to be sure the next pass did not fall in it."""
        for _ in range(ATTEMPTS):
            idem_keys = self.keys_for(n, held_by)
            self.pass_commands = self.reaper_pass()
            used, elapsed = _window(self.primaries, partial(self.run_batch, idem_keys))
            beat = any(_calls(r, PRESENCE_SCAN) for r in self.primaries)
            clean = elapsed + self.idle_s <= PASS_FREE_S and not beat
            if clean:
                break
        per_run = [
            Usage((u.commands - b.commands * elapsed) / n, max(u.cpu_us - b.cpu_us * elapsed, 0.0) / n)
            for u, b in zip(used, self.background, strict=True)
        ]
        return Batch(held_by, per_run, clean)


@contextlib.contextmanager
def _fleet(lab: Lab, cluster: LocalCluster, idle_s: float) -> Iterator[Fleet]:
    """One worker on ``cluster``; the caller waits until it is ready, so that two start side by side."""
    env = {"REFLEXR_REDIS_URL": cluster.url, "REFLEXR_BROKER_URL": lab.url}
    # Each fleet its own queue: a worker takes only the runs of its own cluster.
    queue = f"{QUEUE}-{cluster.primaries}"
    worker = lab.start_worker("workers", queue, CONCURRENCY, env)
    clients = [n.client() for n in cluster.nodes]
    try:
        with Client(load_settings(redis_url=cluster.url, broker_url=lab.url, queue=queue)) as client:
            yield Fleet(cluster, client, worker, clients, idle_s)
    finally:
        for r in clients:
            r.close()


def _per_primary(fleet: Fleet, runs: int) -> dict[str, Any]:
    """The batches of one cluster: into each primary's shards in turn (with more than one), then spread."""
    fleet.run_batch(fleet.keys_for(max(5, runs // 5), None))  # warm up: scripts, connections
    count = fleet.cluster.primaries
    owned = [fleet.measure(runs, i) for i in range(count)] if count > 1 else []
    spread = fleet.measure(runs, None)
    control = fleet.cluster.owner(keys.CONTROL + ":x")
    return {
        "owned": owned, "spread": spread, "background": fleet.background, "control": control,
        "pass": fleet.pass_commands,
    }  # fmt: skip


@dataclass(frozen=True)
class ListingCost:
    commands: float
    wall_ms: float


def _listing(
    url: str, broker_url: str, primaries: list[redis.Redis], fn: Callable[[Client], object]
) -> ListingCost:
    with Client(load_settings(redis_url=url, broker_url=broker_url)) as client:
        fn(client)  # warm up
        costs = [_window(primaries, lambda: fn(client)) for _ in range(LIST_REPS)]
    return ListingCost(
        statistics.median(sum(u.commands for u in used) for used, _ in costs),
        statistics.median(elapsed * 1000 for _, elapsed in costs),
    )


LISTINGS: dict[str, Callable[[Client], object]] = {
    "`runs` (newest 50)": lambda c: c.runs(limit=50),
    "`runs --status dead`": lambda c: c.runs(status="dead", limit=50),
    "`dlq list`": lambda c: c.dead_letters(),
}


def _listings(cluster: LocalCluster, broker_url: str, mix: Mix) -> dict[str, tuple[ListingCost, ListingCost]]:
    """Each listing on a standalone store and on the cluster, both holding ``mix``."""
    cluster.flush()
    with RedisServer(appendfsync="everysec") as single:
        stores = [(single.url, [single.client()]), (cluster.url, [n.client() for n in cluster.nodes])]
        try:
            for url, _ in stores:
                with Client(load_settings(redis_url=url, broker_url=broker_url)) as client:
                    fill(client.store, mix, progress=lambda _: None)
            return {
                name: tuple(_listing(url, broker_url, primaries, fn) for url, primaries in stores)
                for name, fn in LISTINGS.items()
            }
        finally:
            for _, clients in stores:
                for r in clients:
                    r.close()


def run(
    lab: Lab, runs: int, idle_s: float, mix: Mix, progress: Callable[[str], None] = print
) -> dict[str, Any]:
    result: dict[str, Any] = {"runs": runs, "idle_s": idle_s, "mix": mix, "clusters": {}}
    with contextlib.ExitStack() as stack:
        clusters = [stack.enter_context(local_cluster(primaries)) for primaries in (1, 3)]
        for cluster in clusters:
            cluster.wait_ok()
        fleets = [stack.enter_context(_fleet(lab, cluster, idle_s)) for cluster in clusters]
        stack.callback(lab.stop_workers)  # before the clusters stop (and Lab.close stops any left)
        lab.wait_ready(*(f.worker for f in fleets))
        for fleet in fleets:  # one after the other: the idle one costs its own cluster only
            primaries = fleet.cluster.primaries
            result["clusters"][primaries] = _per_primary(fleet, runs)
            spread = result["clusters"][primaries]["spread"].per_run
            progress(
                f"  {primaries} primar{'y' if primaries == 1 else 'ies'}: "
                f"{sum(u.commands for u in spread):.1f} commands, "
                f"{sum(u.cpu_us for u in spread):.0f} server CPU µs per run"
            )
        # Killed, not stopped: nothing is in flight, and their reapers' ticks would count in the
        # listings (the cluster is emptied anyway).
        lab.kill_workers()
        result["listings"] = _listings(clusters[1], lab.url, mix)
    return result


def _names(n: int, control: int) -> list[str]:
    return [f"P{i + 1}" + (" (control slot)" if i == control else "") for i in range(n)]


def _share(usages: list[Usage], attr: str) -> float:
    values = [getattr(u, attr) for u in usages]
    return max(values) / sum(values) if sum(values) > 0 else 0.0


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**MISSED**"


def _per_primary_table(result: dict[str, Any]) -> list[str]:
    three = result["clusters"][3]
    names = _names(3, three["control"])
    lines = [
        f"| cluster | runs in the shards of | commands per run on {' · '.join(names)} "
        f"| server CPU µs per run on {' · '.join(names)} |",
        "|---|---|---|---|",
    ]
    rows = [(3, f"P{b.held_by + 1}", b) for b in three["owned"]] + [(3, "every primary", three["spread"])]
    rows.append((1, "P1 (every slot)", result["clusters"][1]["spread"]))
    for primaries, held, batch in rows:
        commands = " · ".join(f"{u.commands:.1f}" for u in batch.per_run)
        cpu = " · ".join(f"{u.cpu_us:.0f}" for u in batch.per_run)
        mark = "" if batch.clean else " (a reaper pass or a presence beat is in it)"
        lines.append(
            f"| {primaries} primar{'y' if primaries == 1 else 'ies'} | {held}{mark} | {commands} | {cpu} |"
        )
    return lines


def _foreign(three: dict[str, Any]) -> float:
    """The most commands per run, either way, a primary ran for a batch whose runs it holds none of
    (net of its background, so noise makes some negative)."""
    return max(
        (abs(u.commands) for b in three["owned"] for i, u in enumerate(b.per_run) if i != b.held_by),
        default=0.0,
    )


def _summary_table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| cluster | commands per run | server CPU µs per run | busiest primary's share: commands · CPU "
        "| runs per core (10⁶ / CPU µs per run) | implied ceiling, runs/s (cores × runs per core) "
        "| bounded by the busiest primary (10⁶ / its CPU µs per run) |",
        "|---|---|---|---|---|---|---|",
    ]
    for primaries in (1, 3):
        spread = result["clusters"][primaries]["spread"].per_run
        cpu = sum(u.cpu_us for u in spread)
        per_core = 1e6 / cpu if cpu else 0.0
        busiest = max(u.cpu_us for u in spread)
        lines.append(
            f"| {primaries} primar{'y' if primaries == 1 else 'ies'} | {sum(u.commands for u in spread):.1f} "
            f"| {cpu:.0f} | {_share(spread, 'commands'):.0%} · {_share(spread, 'cpu_us'):.0%} "
            f"| {per_core:,.0f} | {primaries * per_core:,.0f} | {1e6 / busiest if busiest else 0.0:,.0f} |"
        )
    return lines


def _listing_table(listings: dict[str, tuple[ListingCost, ListingCost]]) -> list[str]:
    lines = [
        "| listing | single store: commands · wall ms | 3-primary cluster: commands · wall ms "
        "| fanned-out / single-store wall |",
        "|---|---|---|---|",
    ]
    for name, (single, fanned) in listings.items():
        lines.append(
            f"| {name} | {single.commands:.0f} · {single.wall_ms:.2f} | {fanned.commands:.0f} · "
            f"{fanned.wall_ms:.2f} | {fanned.wall_ms / single.wall_ms:.1f}× |"
        )
    return lines


def render(result: dict[str, Any]) -> str:
    three, mix = result["clusters"][3], result["mix"]
    background = " · ".join(
        f"{u.commands:.0f} commands/s, {u.cpu_us / 1000:.1f} CPU ms/s" for u in three["background"]
    )
    spread = three["spread"].per_run
    share, foreign = _share(spread, "commands"), _foreign(three)
    runs_key = next(iter(result["listings"]))
    single, fanned = result["listings"][runs_key]
    lines = [
        f"{result['runs']} `five_steps` runs per batch, one fleet worker (`-c {CONCURRENCY}`), the store "
        "on a Redis Cluster the benchmark starts (1 primary holding every slot, then 3 primaries; no "
        "replicas), the broker on a standalone Redis. Per run, net of each primary's background "
        f"(measured for {result['idle_s']:g} s before each batch, after the reaper's pass). The "
        "primaries share this machine's cores, so the ceilings are what one core per primary would give.",
        "",
        *_per_primary_table(result),
        "",
        *_summary_table(result),
        "",
        f"- the fleet's background on the 3 primaries, taken out above: {background} between the "
        f"reaper's passes, and a pass over every shard (nudged before each batch, so that none falls "
        f"in it; else one every 10 s when idle): {' · '.join(str(n) for n in three['pass'])} commands",
        f"- busiest primary's share of the commands with 3 primaries: {share:.0%} "
        f"(target ≤ {TARGET_SHARE:.0%}: {_verdict(share <= TARGET_SHARE)})",
        f"- commands per run on a primary that holds none of the batch's runs: at most ±{foreign:.1f} "
        f"(target ≤ {TARGET_FOREIGN:g}, about none: {_verdict(foreign <= TARGET_FOREIGN)})",
        "",
        f"Listings over a store of {mix.finished:,} finished, {mix.dead:,} dead and {mix.waiting:,} "
        f"waiting runs, median of {LIST_REPS}:",
        "",
        *_listing_table(result["listings"]),
        "",
        f"- fanned-out / single-store `runs` wall: {fanned.wall_ms / single.wall_ms:.1f}× "
        f"({fanned.commands:.0f} commands against {single.commands:.0f})",
    ]
    return "\n".join(lines)
