"""The cost of streaming (issue 22): what ``emit`` costs a step, and how soon a reader gets an item.

On a private redis-server, in this process (the store as the attempt's port, as the journal bench):

- **throughput**: one step emitting ``ITEMS`` small items (``await emit(i)`` in a loop) against the
  same step without emits; items per second, and the EVALSHAs of ``emit.lua`` per item (each
  batch is one round trip);
- **latency**: a step emitting ``LATENCY_N`` items one at a time, ``GAP_S`` apart, while a
  ``Client.stream`` reader blocks in XREAD in another process; from the ``emit`` call to the item
  in the reader's hands, against a PING round trip.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, emit
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store.redis_store import RedisStore

ITEMS = 10_000
LATENCY_N = 200
GAP_S = 0.005


def _emitting(name: str, n: int, gap_s: float, sent: list[float] | None) -> GraphAction:
    g = GraphBuilder(name=name, input_type=int, output_type=int, auto_instrument=False)

    @g.step
    async def speak(ctx: StepContext[None, None, int]) -> int:
        for i in range(n):
            if sent is not None:
                sent.append(time.monotonic())
            if ctx.inputs:
                await emit(i)
            if gap_s:
                await asyncio.sleep(gap_s)
        return n

    g.add(g.edge_from(g.start_node).to(speak), g.edge_from(speak).to(g.end_node))
    return GraphAction(g.build())


def _new_attempt(store: RedisStore) -> Any:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph="bench", inputs_json="1", max_attempts=3, dispatch_grace_ms=600_000)
    return store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()


def _attempt_s(store: RedisStore, action: GraphAction, emits: bool) -> float:
    ctx = _new_attempt(store)
    t0 = time.perf_counter()
    asyncio.run(run_attempt(action, store, ctx, inputs=int(emits)))
    return time.perf_counter() - t0


def _evalshas(store: RedisStore) -> int:
    stats = store.client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def _throughput(store: RedisStore, reps: int) -> dict[str, float]:
    action = _emitting("bench_stream", ITEMS, 0.0, None)
    _attempt_s(store, action, True)  # warm up
    with_emits, without, calls = [], [], []
    for _ in range(reps):
        before = _evalshas(store)
        with_emits.append(_attempt_s(store, action, True))
        calls.append(_evalshas(store) - before - 2)  # less the claim-free run's own scripts: save, none
        without.append(_attempt_s(store, action, False))
    emitting, plain = statistics.median(with_emits), statistics.median(without)
    return {
        "items_per_s": ITEMS / emitting,
        "emit_s": emitting,
        "plain_s": plain,
        "us_per_item": (emitting - plain) / ITEMS * 1e6,
        "writes": statistics.median(calls),
    }


READER = """
import sys, time
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
client = Client(load_settings(redis_url=sys.argv[1]))
print("ready", flush=True)
for _ in client.stream(sys.argv[2], timeout=120):
    print(time.monotonic(), flush=True)
"""
"""A reader in a process of its own, as a service's would be: it prints when each item came
(CLOCK_MONOTONIC, the same clock in every process of the machine)."""


RAW_READER = """
import sys, time, redis
r = redis.Redis.from_url(sys.argv[1])
last = "0-0"
print("ready", flush=True)
while True:
    for _, entries in r.xread({sys.argv[2]: last}, block=0, count=100):
        for entry_id, _ in entries:
            last = entry_id
            print(time.monotonic(), flush=True)
"""
"""The floor: a bare XREAD BLOCK reader in a process of its own, woken by a bare XADD."""


def _raw_latency(store: RedisStore, url: str) -> float:
    key = f"bench:raw:{uuid.uuid4().hex}"
    reader = subprocess.Popen([sys.executable, "-c", RAW_READER, url, key], stdout=subprocess.PIPE, text=True)
    sent: list[float] = []
    try:
        assert reader.stdout is not None
        reader.stdout.readline()
        for i in range(LATENCY_N):
            sent.append(time.monotonic())
            store.client.xadd(key, {"v": i})
            time.sleep(GAP_S)
        got = [float(reader.stdout.readline()) for _ in range(LATENCY_N)]
    finally:
        reader.kill()
        reader.wait()
    return statistics.median(b - a for a, b in zip(sent, got, strict=True))


def _latency(store: RedisStore, url: str) -> dict[str, float]:
    sent: list[float] = []
    action = _emitting("bench_stream_latency", LATENCY_N, GAP_S, sent)
    ctx = _new_attempt(store)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, url, ctx.run_id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None
        reader.stdout.readline()  # ready: it blocks in XREAD before the first emit, or reads it at once
        asyncio.run(run_attempt(action, store, ctx, inputs=1))
        store.succeed(ctx, "0")  # the run ends: the reader stops
        got = [float(line) for line in reader.stdout]
    finally:
        reader.kill()
        reader.wait()
    pings = []
    for _ in range(LATENCY_N):
        t0 = time.perf_counter()
        store.client.ping()
        pings.append(time.perf_counter() - t0)
    latency = statistics.median(b - a for a, b in zip(sent, got, strict=False))
    ping = statistics.median(pings)
    raw = _raw_latency(store, url)
    return {
        "latency_us": latency * 1e6,
        "ping_us": ping * 1e6,
        "rtts": latency / ping,
        "raw_us": raw * 1e6,
        "n": len(got),
    }


def run(reps: int = 3) -> dict[str, Any]:
    with RedisServer(appendfsync="everysec") as server:
        store = RedisStore.from_url(server.url)
        store.preload_scripts()
        result: dict[str, Any] = {**_throughput(store, reps), **_latency(store, server.url), "reps": reps}
        store.close()
    return result


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"Median of {r['reps']} runs; a step emitting {ITEMS} small items, and one emitting "
            f"{LATENCY_N} items {GAP_S * 1000:g} ms apart to a blocked `Client.stream` reader.",
            "",
            "| measure | value |",
            "|---|---|",
            f"| items per second, one step | {r['items_per_s']:,.0f} |",
            f"| the step with emits / without | {r['emit_s'] * 1000:.0f} ms / {r['plain_s'] * 1000:.1f} ms |",
            f"| added per item | {r['us_per_item']:.1f} µs |",
            f"| writes (emit.lua EVALSHAs, one round trip each) for {ITEMS} items | {r['writes']:.0f} |",
            f"| emit to a blocked reader, median | {r['latency_us']:.0f} µs = {r['rtts']:.1f} round trips "
            f"(PING {r['ping_us']:.0f} µs) |",
            f"| the floor: a bare XADD to a bare XREAD BLOCK reader, median | {r['raw_us']:.0f} µs |",
            "",
            "From `emit` to the reader there are two round trips: the item's EVALSHA (a lone item is "
            "written by the step's own thread), and the reply of the reader's XREAD, which carries it; "
            "the rest is the wake-up of the reader's process, which the floor shows.",
        ]
    )


if __name__ == "__main__":
    print(render(run()))
