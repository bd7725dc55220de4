"""The cost of recording finished work between checkpoints (issue 9), against one Redis round trip.

Side by side in one run, on a private redis-server:

- a record write alone (``save_record``, one EVALSHA) against a PING in a hot loop;
- a branch result: a map over ``ITEMS`` items whose branch step has a return annotation (its
  result is recorded: the state is written down before and after, the result read back, one
  record written) against the same map whose step has none (nothing recorded), per item;
- a durable call: a step making ``CALLS`` calls through ``durable_call`` against the same step
  calling the function directly, per call.

Each added cost is also given as a multiple of one round trip measured in situ: the added
cost per call of a step whose calls each make one PING.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import GraphAction, durable_call
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.port import Record
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store.redis_store import RedisStore

ITEMS = 50
CALLS = 50


def _mapped(recorded: bool) -> GraphAction:
    """start -> map over ``ITEMS`` -> work -> join -> end; ``recorded``: work's result can be recorded."""
    name = "bench_map_recorded" if recorded else "bench_map_plain"
    g = GraphBuilder(name=name, input_type=list[int], output_type=list[int], auto_instrument=False)
    if recorded:

        async def work(ctx: StepContext[None, None, int]) -> int:
            return ctx.inputs + 1

    else:

        async def work(ctx: StepContext[None, None, int]):  # type: ignore[no-untyped-def]  # unrecordable
            return ctx.inputs + 1

    step = g.step(work, node_id="work")
    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).map().to(step),
        g.edge_from(step).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return GraphAction(g.build())


def _calling(how: str, ping: Callable[[], Any]) -> GraphAction:
    """One step making ``CALLS`` calls: ``direct``, through ``durable_call``, or ``pinging`` (a PING each)."""
    g = GraphBuilder(name=f"bench_calls_{how}", input_type=int, output_type=int, auto_instrument=False)

    def fn(n: int) -> int:
        return n + 1

    @g.step
    async def step(ctx: StepContext[None, None, int]) -> int:
        total = 0
        for n in range(CALLS):
            if how == "durable":
                total += await durable_call("fn", fn, n)
            elif how == "pinging":
                ping()
                total += fn(n)
            else:
                total += fn(n)
        return total

    g.add(g.edge_from(g.start_node).to(step), g.edge_from(step).to(g.end_node))
    return GraphAction(g.build())


def _attempt_s(store: RedisStore, action: GraphAction, inputs: Any) -> float:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph=action.name, inputs_json="0", max_attempts=3, dispatch_grace_ms=600_000)
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()
    t0 = time.perf_counter()
    asyncio.run(run_attempt(action, store, ctx, inputs=inputs))
    return time.perf_counter() - t0


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _record_write_us(store: RedisStore, n: int = 300) -> tuple[float, float]:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph="g", inputs_json="0", max_attempts=3, dispatch_grace_ms=600_000)
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()
    writes, pings = [], []
    for i in range(n):
        t0 = time.perf_counter()
        store.save_record(ctx, Record(f"c|s|-|k|fn|{i}", "1"))
        writes.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        store.client.ping()
        pings.append(time.perf_counter() - t0)
    return _median_us(writes), _median_us(pings)


def run(reps: int = 5) -> dict[str, Any]:
    with RedisServer(appendfsync="everysec") as server:
        store = RedisStore.from_url(server.url)
        store.preload_scripts()
        write_us, ping_us = _record_write_us(store)
        recorded, plain = _mapped(True), _mapped(False)
        direct, durable = _calling("direct", store.client.ping), _calling("durable", store.client.ping)
        pinging = _calling("pinging", store.client.ping)
        items = list(range(ITEMS))
        for action, inputs in ((recorded, items), (plain, items), (direct, 0), (durable, 0), (pinging, 0)):
            _attempt_s(store, action, inputs)  # warm up imports, scripts and adapters
        branch, call, rtt = [], [], []
        for _ in range(reps):
            branch.append((_attempt_s(store, recorded, items) - _attempt_s(store, plain, items)) / ITEMS)
            base = _attempt_s(store, direct, 0)
            call.append((_attempt_s(store, durable, 0) - base) / CALLS)
            rtt.append((_attempt_s(store, pinging, 0) - base) / CALLS)
        store.close()
    in_situ = statistics.median(rtt)
    return {
        "write_us": write_us,
        "ping_us": ping_us,
        "branch_us": _median_us(branch),
        "call_us": _median_us(call),
        "rtt_in_situ_us": in_situ * 1e6,
        "branch_rtts": statistics.median(branch) / in_situ,
        "call_rtts": statistics.median(call) / in_situ,
        "reps": reps,
    }


def render(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"Median of {r['reps']} runs; a map over {ITEMS} items, a step making {CALLS} calls. "
            "Round trip in situ: a PING per call of the same step.",
            "",
            "| recorded | µs each | Redis round trips |",
            "|---|---|---|",
            f"| record write alone (one EVALSHA) | {r['write_us']:.0f} | "
            f"{r['write_us'] / r['ping_us']:.2f} (against a hot-loop PING, {r['ping_us']:.0f} µs) |",
            f"| branch result (added per branch step) | {r['branch_us']:.0f} | {r['branch_rtts']:.2f} |",
            f"| durable call (added per call) | {r['call_us']:.0f} | {r['call_rtts']:.2f} |",
            "",
            f"One round trip in situ: {r['rtt_in_situ_us']:.0f} µs. A branch result also writes the state "
            "down before and after its step, which grows with the state.",
        ]
    )
