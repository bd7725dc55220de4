"""Limits (issue 13): Redis round trips per limited step, and how closely a rate is kept.

In-process attempts against a private redis-server, through the fleet's own AttemptPort and
limiter, measured side by side in one run:

- Round trips: an attempt of a map of ``steps`` branches is run with and without a limit on
  its step, uncontended (a rate and a concurrency far above what the map asks), counting the
  commands the client sends; the difference divided by the branches is the cost of a limit.
  Each kind (rate only, concurrency only, both) is measured, with the time per limited step in
  PING round trips measured in the same run.
- Rate accuracy: a map of ``n_rated`` branches under ``RATE`` (GCRA, bucket of 1), all asking at
  once. Observed rate = (starts - 1) / (last start - first start), over the configured rate.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from bench.checkpoint_cost import round_trip_s
from reflexr_graph import GraphAction, Limit
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.limits import Limiter, parse_rate
from reflexr_graph.fleet.attempt_port import AttemptPort
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import RedisStore

RATE = "20/s"
KINDS = {
    "rate": {"rate": "100000/s", "burst": 1000},
    "concurrency": {"concurrency": 100000},
    "rate + concurrency": {"rate": "100000/s", "burst": 1000, "concurrency": 100000},
}


def _mapped(limit: Limit | None, starts: list[float]) -> GraphAction:
    g = GraphBuilder(
        name=f"bench_limits_{uuid.uuid4().hex[:6]}", input_type=int, output_type=int, auto_instrument=False
    )

    @g.step
    async def plan(ctx: StepContext[None, None, int]) -> list[int]:
        return list(range(ctx.inputs))

    @g.step
    async def call(ctx: StepContext[None, None, int]) -> int:
        starts.append(time.monotonic())
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[None, None, list[int]]) -> int:
        return len(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(call),
        g.edge_from(call).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build(), limits={"call": limit} if limit is not None else None)


def _attempt(store: RedisStore, action: GraphAction, n: int) -> tuple[int, float]:
    """Run one attempt of ``action`` over ``n`` items; the commands it sent, and its seconds."""
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph=action.name, inputs_json=str(n), max_attempts=3, dispatch_grace_ms=600_000)
    ctx = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()
    port = AttemptPort(store, None, {}, lambda: 600.0, slot_ttl_ms=600_000)
    client, sent = store.client, 0
    original = client.execute_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        return original(*args, **kwargs)

    client.execute_command = counting  # type: ignore[method-assign]
    t0 = time.perf_counter()
    try:
        asyncio.run(run_attempt(action, port, ctx, inputs=n, limiter=Limiter(port, ctx)))
    finally:
        client.execute_command = original  # type: ignore[method-assign]
    return sent, time.perf_counter() - t0


def _round_trips(store: RedisStore, steps: int, reps: int) -> dict[str, dict[str, float]]:
    """Per kind, the median over ``reps`` of the commands and seconds a limit adds per step, each
    rep measured beside an unlimited attempt of its own."""
    _attempt(store, _mapped(None, []), 10)  # warm up imports and scripts
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
    for _ in range(reps):
        plain_sent, plain_s = _attempt(store, _mapped(None, []), steps)
        for kind, options in KINDS.items():
            key = f"bench:{kind.replace(' + ', '-')}:{uuid.uuid4().hex[:6]}"
            limit = Limit(key=key, **options)  # type: ignore[arg-type]
            sent, seconds = _attempt(store, _mapped(limit, []), steps)
            samples[kind].append(((sent - plain_sent) / steps, (seconds - plain_s) / steps))
    return {
        kind: {
            "round_trips": statistics.median(t for t, _ in found),
            "added_s": statistics.median(s for _, s in found),
        }
        for kind, found in samples.items()
    }


def _rate(store: RedisStore, n: int) -> dict[str, float]:
    starts: list[float] = []
    key = f"bench:rate:{uuid.uuid4().hex[:6]}"
    _, seconds = _attempt(store, _mapped(Limit(key=key, rate=RATE), starts), n)
    starts.sort()
    observed = (len(starts) - 1) / (starts[-1] - starts[0])
    configured = 1000 / parse_rate(RATE)
    return {"n": n, "observed": observed, "configured": configured, "seconds": seconds}


def run(steps: int, reps: int, n_rated: int) -> dict[str, Any]:
    with RedisServer(appendfsync="everysec") as server:
        store = RedisStore.from_url(server.url)
        store.preload_scripts()
        rtt = round_trip_s(store)
        trips = _round_trips(store, steps, reps)
        rate = _rate(store, n_rated)
        store.close()
    return {"rtt_s": rtt, "steps": steps, "reps": reps, "kinds": trips, "rate": rate}


def render(result: dict[str, Any]) -> str:
    rtt_us = result["rtt_s"] * 1e6
    rate = result["rate"]
    lines = [
        f"In-process attempts of a map of {result['steps']} branches, each limited step uncontended, beside",
        f"the same map without a limit; median of {result['reps']} pairs, PING median {rtt_us:.0f} µs in the",
        "same run. A step without a limit costs no round trip.",
        "",
        "| limit | Redis round trips per limited step | added µs per step | added / PING |",
        "|---|---|---|---|",
    ]
    for kind, row in result["kinds"].items():
        added_us = row["added_s"] * 1e6
        lines.append(f"| {kind} | {row['round_trips']:.2f} | {added_us:.0f} | {added_us / rtt_us:.1f} |")
    lines += [
        "",
        "A rate takes one round trip (a token now, or one reserved with its start time); a concurrency",
        "slot one to take it, and goes back with the branch's record. Waiting steps poll only for a slot,",
        "never for a rate.",
        "",
        f"Rate accuracy: {rate['n']} branches asking at once under `{RATE}` (bucket of 1): observed "
        f"{rate['observed']:.2f}/s over configured {rate['configured']:.0f}/s = "
        f"**{rate['observed'] / rate['configured']:.3f}**; the attempt took {rate['seconds']:.2f} s "
        f"(ideal {(rate['n'] - 1) / rate['configured']:.2f} s).",
    ]
    return "\n".join(lines)
