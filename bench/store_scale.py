"""The store at scale: what each reaper tick and CLI operation costs with many runs held.

Two private ``redis-server`` processes (no AOF: this measures the store's work, not the disk)
are filled through the store's own scripts (``reflexr_graph/local_store.py``): one with 1,000 finished
runs, 100 dead and 10 waiting, the other with ``scale`` finished, a tenth as many dead and a
hundredth waiting. Every operation below runs on one, then on the other, ``REPS`` times
over, so a noisy neighbour hits both alike; each is measured
by Redis itself (``INFO commandstats`` after ``CONFIG RESETSTAT``: the commands it ran, Lua's
included, and their server time) and by the wall clock around the call. Then the finished
runs of the large store expire, and the reaper's prune pass runs tick after tick until the
indexes hold none of them, which is how long retention takes to remove them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.local_store import Cost, Mix, counted, fill, operations
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, fanout, keys
from reflexr_graph.store.recovery import PRUNE_BATCH
from reflexr_graph.store.settings import StoreOptions

SMALL = Mix(1000, 100, 10)
REPS = 9
TICK_S = 1.0
"""The reaper's interval: prune runs once per tick."""


def _replay_by_filter(client: Client, r: redis.Redis) -> tuple[Cost, int]:
    """``dlq replay --all --reason step_failed``: the filter and every replay (at most 1,000 runs)."""
    replayed: list[str] = []

    def replay() -> None:
        for info in client.dead_letters(reason="step_failed"):
            client.replay(info.run_id)
            replayed.append(info.run_id)

    return counted(r, replay), len(replayed)


def _expire_finished(r: redis.Redis, count: int) -> None:
    """Setup, not measured: the finished runs' retention passes now (their keys expire in 1 ms)."""
    pipe = r.pipeline(transaction=False)
    for n in range(count):
        for key in keys.run_keys(f"s-finished-{n}")[:3]:
            pipe.pexpire(key, 1)
        if n % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def _retention(url: str, r: redis.Redis, finished: int) -> dict[str, Any]:
    """Prune tick after tick until no expired run is left in the indexes."""
    used_before = int(r.info("memory")["used_memory"])
    _expire_finished(r, finished)
    store = RedisStore.from_url(url, options=StoreOptions(run_retention_s=1))
    ticks, t0 = 0, time.perf_counter()
    try:
        while fanout.total(r, partial(keys.status_set, Status.SUCCEEDED)) > 0:
            store.prune()
            ticks += 1
    finally:
        store.close()
    return {
        "ticks": ticks,
        "busy_s": time.perf_counter() - t0,
        "freed_mb": (used_before - int(r.info("memory")["used_memory"])) / 2**20,
        "left_in_all": fanout.total(r, keys.all_runs),
    }


@dataclass
class Side:
    """One filled store and what the benchmark measures on it."""

    url: str
    r: redis.Redis
    client: Client
    reaper: Reaper
    mix: Mix
    fill_s: float
    memory: int

    @classmethod
    def filled(cls, url: str, mix: Mix, progress: Callable[[str], None]) -> Side:
        r = redis.Redis.from_url(url)
        base = int(r.info("memory")["used_memory"])
        client = Client(load_settings(redis_url=url))
        t0 = time.perf_counter()
        fill(client.store, mix, progress=progress)
        fill_s = time.perf_counter() - t0
        memory = int(r.info("memory")["used_memory"]) - base
        progress(f"  {mix.total} runs loaded in {fill_s:.0f} s, {memory / 2**20:.0f} MB")
        reaper = Reaper(create_app(load_settings(redis_url=url), {}), client.store)
        reaper.tick()  # takes the lock and publishes: the ticks measured are steady ones
        return cls(url, r, client, reaper, mix, fill_s, memory)

    def close(self) -> None:
        self.reaper.stop()
        self.client.close()
        self.r.close()


def _side_by_side(small: Side, large: Side) -> tuple[dict[str, list[Cost]], dict[str, list[Cost]]]:
    """Each operation on the small store, then on the large one, repetition after repetition."""
    ops = [operations(side.client, side.reaper) for side in (small, large)]
    costs: tuple[dict[str, list[Cost]], dict[str, list[Cost]]] = ({}, {})
    for _ in range(REPS):
        for name in ops[0]:
            for side, side_ops, out in zip((small, large), ops, costs, strict=True):
                out.setdefault(name, []).append(counted(side.r, side_ops[name]))
    return costs


def _summary(side: Side, costs: dict[str, list[Cost]]) -> dict[str, Any]:
    replay = _replay_by_filter(side.client, side.r)
    return {"mix": side.mix, "fill_s": side.fill_s, "memory": side.memory, "costs": costs, "replay": replay}


def run(scale: int, progress: Callable[[str], None] = print) -> dict[str, Any]:
    servers = [RedisServer(appendonly=False), RedisServer(appendonly=False)]
    sides: list[Side] = []
    try:
        for server, mix in zip(servers, (SMALL, Mix(scale, scale // 10, scale // 100)), strict=True):
            server.start()
            sides.append(Side.filled(server.url, mix, progress))
        small_costs, large_costs = _side_by_side(*sides)
        result = {"small": _summary(sides[0], small_costs), "large": _summary(sides[1], large_costs)}
        result["retention"] = _retention(sides[1].url, sides[1].r, sides[1].mix.finished)
        return result
    finally:
        for side in sides:
            side.close()
        for server in servers:
            server.close()


def _median(costs: list[Cost], attr: str) -> float:
    return statistics.median(getattr(c, attr) for c in costs)


def _row(name: str, small: list[Cost], large: list[Cost]) -> str:
    cells = [
        f"{_median(small, 'commands'):.0f}",
        f"{_median(large, 'commands'):.0f}",
        f"{_median(small, 'server_us'):.0f}",
        f"{_median(large, 'server_us'):.0f}",
        f"{_median(small, 'wall_ms'):.2f}",
        f"{_median(large, 'wall_ms'):.2f}",
        f"{_median(large, 'wall_ms') / max(_median(small, 'wall_ms'), 1e-9):.2f}",
    ]
    return f"| {name} | " + " | ".join(cells) + " |"


def render(result: dict[str, Any]) -> str:
    small, large, ret = result["small"], result["large"], result["retention"]
    s, big = small["mix"], large["mix"]
    lines = [
        f"Two private Redis servers (no AOF), filled through the store's own scripts, pipelined "
        f"(`reflexr_graph/local_store.py`): **small** = {s.finished:,} finished, {s.dead:,} dead, "
        f"{s.waiting:,} waiting; **large** = {big.finished:,} finished, {big.dead:,} dead, "
        f"{big.waiting:,} waiting "
        "(`--scale-runs N` sets the finished count; 1,000,000 needs about 2 GB of Redis and a "
        "quarter of an hour to load here). Each operation runs on one store then the other, "
        f"{REPS} times over; medians. Commands and server µs are Redis's own count "
        "(`INFO commandstats`, commands run by Lua included).",
        "",
        "| operation | commands, small | commands, large | server µs, small | server µs, large "
        "| wall ms, small | wall ms, large | wall large / small |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(name, small["costs"][name], large["costs"][name]) for name in small["costs"]]
    rows = [("small", small), ("large", large)]
    lines += ["", "| replay by filter (`dlq replay --all --reason R`) | runs replayed | commands per run "
              "| server µs per run | wall ms per run |", "|---|---|---|---|---|"]  # fmt: skip
    for label, d in rows:
        cost, n = d["replay"]
        lines.append(
            f"| {label} | {n} | {cost.commands / n:.1f} | {cost.server_us / n:.0f} | {cost.wall_ms / n:.2f} |"
        )
    lines += [
        "",
        "| store | runs | loaded in s | runs/s loaded | Redis memory MB | bytes per run |",
        "|---|---|---|---|---|---|",
    ]
    for label, d in rows:
        n = d["mix"].total
        lines.append(
            f"| {label} | {n:,} | {d['fill_s']:.1f} | {n / d['fill_s']:,.0f} | {d['memory'] / 2**20:.1f} "
            f"| {d['memory'] / n:,.0f} |"
        )
    lines += [
        "",
        f"Retention: once the large store's {big.finished:,} finished runs expired, the reaper's prune "
        f"({PRUNE_BATCH} index entries per terminal status per tick, pipelined; it deletes the run's "
        f"remaining keys too) needed **{ret['ticks']} ticks**, {ret['busy_s']:.1f} s of work back to back, "
        f"so about {ret['ticks'] * TICK_S:.0f} s at one tick per second; it freed {ret['freed_mb']:.0f} MB, "
        f"and `rg:all` kept {ret['left_in_all']:,} entries (the dead and waiting runs, still held).",
        "",
        "Every per-tick and per-request figure is the same for both sizes (the commands exactly; time "
        "within noise), except where it is bounded by a limit rather than by the store: `dlq list` "
        "reads up to 1,000 records, and the API page with a filter examines at most "
        "2,000 index entries and returns a cursor. `runs --graph G` with a G few runs have reads the "
        "index newest first until it finds 50, so with a rare graph it grows with the store: there is "
        "no per-graph index.",
    ]
    return "\n".join(lines)
