"""Checkpoint cost per step: the same chain of trivial steps, plain and durable, in one run.

Plain is pydantic-graph's own ``graph.run``. Durable is one reflexr attempt that saves a
checkpoint at every boundary in a private redis-server. The added cost per step is
reported in microseconds and as a multiple of one Redis round trip (PING) measured in
the same run, for states of about 100 B, 10 KB and 1 MB. It also counts the Redis
commands each save sends, and compares early saves with late ones to show the cost
follows the state's size, not the number of steps already done.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.port import AttemptContext, Boundary, Record
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store.hot_path import HotPath
from reflexr_graph.store.records import Claim
from reflexr_graph.store.redis_store import RedisStore

STEPS = 24
SIZES = {"100 B": 100, "10 KB": 10_000, "1 MB": 1_000_000}


class Blob(BaseModel):
    data: str = ""
    count: int = 0


def chain(steps: int = STEPS, *, ping: Callable[[], Any] | None = None) -> GraphAction:
    """A chain of trivial steps; with ``ping``, each step also makes one Redis round trip."""
    # auto_instrument=False on both sides of every comparison: pydantic-graph's own spans (which
    # go through logfire when it is installed, as in the dev extra) cost the same with or without
    # reflexr, and the bench measures what durability adds.
    g = GraphBuilder(
        name=f"chain{steps}", state_type=Blob, input_type=int, output_type=int, auto_instrument=False
    )
    nodes = []
    for i in range(steps):

        async def step(ctx: StepContext[Blob, None, int]) -> int:
            ctx.state.count += 1
            if ping is not None:
                ping()
            return ctx.inputs + 1

        nodes.append(g.step(step, node_id=f"s{i}"))
    g.add(g.edge_from(g.start_node).to(nodes[0]), g.edge_from(nodes[-1]).to(g.end_node))
    for a, b in itertools.pairwise(nodes):
        g.add(g.edge_from(a).to(b))
    return GraphAction(g.build())


class CountingHotPath(HotPath):
    """The attempt's held connection, counting its round trips."""

    sent = 0

    def _round_trip_of(self, send: Callable[[Any], None]) -> Any:
        self.sent += 1
        return super()._round_trip_of(send)


@dataclass
class TimedStore:
    """The store port as a worker's attempt has it (fleet/attempt_port.py): the checkpoint and the
    records its claim read, and saves and records on the attempt's held connection
    (store/hot_path.py), timing each save so early and late saves can be compared."""

    store: RedisStore
    saves: list[float] = field(default_factory=list)
    hot: HotPath | None = None
    claim: Claim | None = None

    def load_checkpoint(self, run_id: str) -> str | None:
        assert self.claim is not None and self.claim.run_id == run_id
        return self.claim.checkpoint

    def load_records(self, run_id: str) -> dict[str, str]:
        assert self.claim is not None and self.claim.run_id == run_id
        return self.claim.records

    def save_record(
        self, ctx: AttemptContext, record: Record, *, returning: Sequence[tuple[str, str]] = ()
    ) -> None:
        assert self.hot is not None and not returning, "the bench's steps hold no limit slots"
        self.store.save_record(ctx, record, via=self.hot)

    def save_checkpoint(
        self, ctx: AttemptContext, boundary: Boundary, *, returning: Sequence[tuple[str, str]] = ()
    ) -> None:
        assert self.hot is not None and not returning, "the bench's steps hold no limit slots"
        t0 = time.perf_counter()
        self.store.save_checkpoint(ctx, boundary, via=self.hot)
        self.saves.append(time.perf_counter() - t0)


def _claimed(store: RedisStore, action: GraphAction) -> Claim:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph=action.name, inputs_json="0", max_attempts=3, dispatch_grace_ms=600_000)
    return store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000)


def _time_plain(action: GraphAction, state: Blob) -> float:
    t0 = time.perf_counter()
    asyncio.run(action.graph.run(state=state.model_copy(), inputs=0))
    return time.perf_counter() - t0


def _time_durable(action: GraphAction, port: TimedStore, state: Blob) -> float:
    claim = port.claim = _claimed(port.store, action)
    ctx = claim.context()
    t0 = time.perf_counter()
    with HotPath(port.store) as port.hot:
        finished = asyncio.run(run_attempt(action, port, ctx, inputs=0, state=state.model_dump()))
    # As a worker records it: the output with the finished checkpoint, in one script.
    port.store.succeed(ctx, json.dumps(finished.output), checkpoint=finished.checkpoint, seq=finished.seq)
    return time.perf_counter() - t0


def round_trip_s(store: RedisStore, n: int = 300) -> float:
    client = store.client
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.ping()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def round_trips_per_save(store: RedisStore, action: GraphAction) -> float:
    """Client round trips of one attempt, divided by its saves."""
    client = store.client
    sent = 0
    original = client.execute_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        return original(*args, **kwargs)

    claim = _claimed(store, action)
    port = TimedStore(store, claim=claim)
    ctx = claim.context()
    client.execute_command = counting  # type: ignore[method-assign]
    try:
        with CountingHotPath(store) as hot:
            port.hot = hot
            asyncio.run(run_attempt(action, port, ctx, inputs=0))
    finally:
        client.execute_command = original  # type: ignore[method-assign]
    return (sent + hot.sent) / len(port.saves)


def measure_size(store: RedisStore, size: int, reps: int) -> dict[str, float]:
    """Plain, plain plus one PING per step, and durable, timed in turn ``reps`` times."""
    action, pinging = chain(), chain(ping=store.client.ping)
    state = Blob(data="x" * size)
    port = TimedStore(store)
    plain, pinged, durable, rtts = [], [], [], []
    _time_plain(action, state), _time_durable(action, port, state)  # warm up imports and scripts
    for _ in range(reps):
        rtts.append(round_trip_s(store, 100))
        plain.append(_time_plain(action, state))
        pinged.append(_time_plain(pinging, state))
        port.saves.clear()
        durable.append(_time_durable(action, port, state))
    added = [(d - p) / STEPS for d, p in zip(durable, plain, strict=True)]
    # One round trip as a step really pays it: between steps, not in a hot loop, where the
    # server and the socket stay warm and a round trip looks cheaper than it is.
    in_situ = [(q - p) / STEPS for q, p in zip(pinged, plain, strict=True)]
    per_rtt = [a / r for a, r in zip(added, in_situ, strict=True)]
    saves = port.saves
    return {
        "plain_per_step_us": statistics.median(plain) / STEPS * 1e6,
        "added_per_step_us": statistics.median(added) * 1e6,
        "added_min_us": min(added) * 1e6,
        "added_max_us": max(added) * 1e6,
        "rtt_us": statistics.median(rtts) * 1e6,
        "rtt_in_situ_us": statistics.median(in_situ) * 1e6,
        "added_in_rtts": statistics.median(per_rtt),
        "rtts_min": min(per_rtt),
        "rtts_max": max(per_rtt),
        "early_save_us": statistics.median(saves[:5]) * 1e6,
        "late_save_us": statistics.median(saves[-6:-1]) * 1e6,
    }


def run(reps: int = 7) -> dict[str, Any]:
    with RedisServer(appendfsync="everysec") as server:
        store = RedisStore.from_url(server.url)
        rows = {
            label: measure_size(store, size, reps if size < 1_000_000 else 3) for label, size in SIZES.items()
        }
        cps = round_trips_per_save(store, chain())
        store.close()
    return {"steps": STEPS, "reps": reps, "rows": rows, "round_trips_per_save": cps}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"Chain of {result['steps']} trivial steps; median of {result['reps']} runs (1 MB: 3), "
        "min-max in brackets. Redis round trips per checkpoint save: "
        f"{result['round_trips_per_save']:.2f}.",
        "",
        "One round trip is measured two ways in the same run: a PING in a hot loop, and in situ, as the",
        "added cost per step of the same chain whose steps each make one PING. The ratio uses the latter.",
        "",
        "| state | plain µs/step | durable added µs/step | RTT hot µs | RTT in situ µs "
        "| added / RTT in situ | early save µs | late save µs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in result["rows"].items():
        lines.append(
            f"| {label} | {r['plain_per_step_us']:.0f} | {r['added_per_step_us']:.0f} "
            f"[{r['added_min_us']:.0f}-{r['added_max_us']:.0f}] | {r['rtt_us']:.0f} | "
            f"{r['rtt_in_situ_us']:.0f} | "
            f"{r['added_in_rtts']:.2f} [{r['rtts_min']:.2f}-{r['rtts_max']:.2f}] | "
            f"{r['early_save_us']:.0f} | {r['late_save_us']:.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run()))
