"""Waiting runs (issue 10): Redis memory per waiting run, and how soon a signal or a timer wakes one.

On one worker with 2 processes, against a private redis-server:

- ``N_WAITING`` runs of ``bench_wait`` wait for the signal ``go``. Memory per waiting run is
  ``used_memory`` grown while they queued and suspended, divided by their number (global
  indexes included), beside the sum of ``MEMORY USAGE … SAMPLES 0`` over one run's own keys.
- Signal to step: the time from ``Client.signal`` returning to the waiting step starting again
  in the worker (its own clock, same host), for ``N_SIGNALS`` runs signalled one at a time,
  against one Redis round trip (a PING from the benchmark, measured in the same run). The time
  ``Client.signal`` itself takes is given in round trips too.
- Timer lateness: ``N_SLEEPS`` durable sleeps of ``SLEEP_S``: when the step starts again,
  after the wake time it recorded. The reaper sleeps until the next due time, at most a second.
- Approvals (issue 35): ``N_APPROVALS`` runs of ``bench_approve`` (bench/approval_graph.py), an
  agent whose tool requires approval, wait for their answer. Their memory is measured as the
  signal waits' is, side by side (``MEMORY USAGE`` summed over the run's own keys, its ``asks``
  hash included); then each is approved with ``Client.resolve_event``, one at a time, and the time
  from that call returning to the step running again, and to the tool running, in the worker is
  given in round trips, as a signal's wake is (target: 10 at most, as for a signal). Between the
  two, the step's agent replays its recorded model request and the answer from its records.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench import approval_graph, fleet_graph
from bench.checkpoint_cost import round_trip_s
from bench.procs import Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from reflexr_graph.store import keys

QUEUE = "bench-waits"
SLEEP_S = 2.0
GRAPHS = f"{fleet_graph.REFS},bench.approval_graph:approver"
"""The waits worker's graphs: the approvals' agent is imported by this worker only."""


def _starts(client: Client, run_id: str) -> list[dict[str, float]]:
    return [json.loads(raw) for raw in client.store.client.lrange(fleet_graph.starts_key(run_id), 0, -1)]


def _waiting(client: Client, run_ids: list[str], what: str) -> None:
    waiting = partial(keys.status_set, Status.WAITING)
    r = client.store.client
    wait_for(
        lambda: all(r.zscore(waiting(client.store.shards.of(x)), x) is not None for x in run_ids),
        300,
        what,
        0.05,
    )


def _memory(client: Client, n: int) -> dict[str, float]:
    r = client.store.client
    before = int(r.info("memory")["used_memory"])
    run_ids = [client.enqueue(fleet_graph.waiter.name, 0.0) for _ in range(n)]
    _waiting(client, run_ids, f"{n} runs to wait")
    after = int(r.info("memory")["used_memory"])
    one = _own_keys(client, run_ids[0])
    for run_id in run_ids:  # wake them, so the next phases start from an idle fleet
        client.signal(run_id, "go", 1)
    wait_for(
        lambda: all(client.get(x).status is Status.SUCCEEDED for x in run_ids), 300, "the runs to end", 0.1
    )
    return {
        "per_run": (after - before) / n,
        "own_keys": sum(one.values()),
        **{f"key_{k}": v for k, v in one.items()},
    }


def _own_keys(client: Client, run_id: str) -> dict[str, int]:
    """``MEMORY USAGE … SAMPLES 0`` of each of the run's own keys, by suffix (0 for one it lacks)."""
    r = client.store.client
    return {k.rsplit(":", 1)[-1]: r.memory_usage(k, samples=0) or 0 for k in keys.run_keys(run_id)}


def _approvals(client: Client, n: int) -> dict[str, Any]:
    """``n`` waiting approvals: memory per run, then each approved, timed to its step running again
    and to its tool running."""
    r = client.store.client
    before = int(r.info("memory")["used_memory"])
    run_ids = [client.enqueue(approval_graph.approver.name, 0) for _ in range(n)]
    _waiting(client, run_ids, f"{n} approvals to wait")
    after = int(r.info("memory")["used_memory"])
    one = _own_keys(client, run_ids[0])
    wakes, steps, calls = [], [], []
    for run_id in run_ids:
        token = (r.lindex(approval_graph.token_key(run_id), 0) or b"").decode()
        t0 = time.perf_counter()
        client.resolve_event(token, {"approvals": {approval_graph.CALL_ID: True}})
        sent = time.time()
        calls.append(time.perf_counter() - t0)
        ran = wait_for(
            lambda x=run_id: r.lrange(approval_graph.tool_key(x), 0, -1), 60, "the tool to run", 0.001
        )
        wakes.append(json.loads(ran[0])["t"] - sent)
        steps.append(_starts(client, run_id)[1]["t"] - sent)
    wait_for(
        lambda: all(client.get(x).status is Status.SUCCEEDED for x in run_ids),
        300,
        "the approvals to end",
        0.1,
    )
    return {
        "per_run": (after - before) / n,
        "own_keys": sum(one.values()),
        "keys": one,
        "wake": wakes,
        "step": steps,
        "call": calls,
    }


def _signal_latency(client: Client, n: int) -> dict[str, list[float]]:
    run_ids = [client.enqueue(fleet_graph.waiter.name, 0.0) for _ in range(n)]
    _waiting(client, run_ids, "the runs to wait")
    wakes, calls = [], []
    for run_id in run_ids:
        t0 = time.perf_counter()
        client.signal(run_id, "go", 1)
        sent = time.time()
        calls.append(time.perf_counter() - t0)
        resumed = wait_for(lambda r=run_id: _starts(client, r)[1:], 60, "the step to start again", 0.001)
        wakes.append(resumed[0]["t"] - sent)
    return {"wake": wakes, "call": calls}


def _timer_lateness(client: Client, n: int) -> list[float]:
    run_ids = [client.enqueue(fleet_graph.waiter.name, SLEEP_S) for _ in range(n)]
    _waiting(client, run_ids, "the sleepers to wait")
    wake_at = {x: client.get(x).wake_at or 0.0 for x in run_ids}
    for run_id in run_ids:
        wait_for(lambda r=run_id: _starts(client, r)[1:], 60, "the sleeper to wake", 0.01)
    return [_starts(client, x)[1]["t"] - wake_at[x] for x in run_ids]


def run(
    lab: Lab,
    n_waiting: int,
    n_signals: int,
    n_sleeps: int,
    n_approvals: int,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    worker = lab.start_worker("workers", QUEUE, 2, {"REFLEXR_GRAPHS": GRAPHS})
    lab.wait_ready(worker)
    try:
        with Client(load_settings(redis_url=lab.url, queue=QUEUE)) as client:
            memory = _memory(client, n_waiting)
            progress(f"  {memory['per_run']:.0f} B per waiting run ({memory['own_keys']} B in its own keys)")
            rtt = round_trip_s(client.store)
            latency = _signal_latency(client, n_signals)
            progress(f"  signal to step: median {statistics.median(latency['wake']) * 1000:.1f} ms")
            lateness = _timer_lateness(client, n_sleeps)
            approvals = _approvals(client, n_approvals)
            progress(
                f"  {approvals['own_keys']} B in a waiting approval's own keys; approval to step: median "
                f"{statistics.median(approvals['step']) * 1000:.1f} ms "
                f"({statistics.median(approvals['step']) / rtt:.0f} round trips), to tool: "
                f"{statistics.median(approvals['wake']) * 1000:.1f} ms "
                f"({statistics.median(approvals['wake']) / rtt:.0f} round trips)"
            )
    finally:
        lab.stop_workers()
    return {
        "n_waiting": n_waiting,
        "memory": memory,
        "rtt_s": rtt,
        **latency,
        "lateness": lateness,
        "approvals": approvals,
    }


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def render(result: dict[str, Any]) -> str:
    m, rtt_ms = result["memory"], result["rtt_s"] * 1000
    wake, call, late = result["wake"], result["call"], result["lateness"]
    own = ", ".join(f"{k.removeprefix('key_')} {v}" for k, v in m.items() if k.startswith("key_") and v)
    rows = [
        f"{result['n_waiting']} runs waiting at once for a signal, on one worker with 2 processes.",
        "",
        "| measure | value | in round trips (PING median " + f"{rtt_ms * 1000:.0f} µs) |",
        "|---|---|---|",
        "| Redis memory per waiting run (`used_memory` growth / runs, indexes included) | "
        f"{m['per_run']:.0f} B | |",
        f"| … of which its own keys (`MEMORY USAGE`: {own}) | {m['own_keys']} B | |",
        f"| `signal` to the waiting step running again, median (p90) of {len(wake)} | "
        f"{_ms(wake, 0.5):.1f} ms ({_ms(wake, 0.9):.1f} ms) | {_ms(wake, 0.5) / rtt_ms:.0f} |",
        f"| `Client.signal` call itself, median | {_ms(call, 0.5):.2f} ms | {_ms(call, 0.5) / rtt_ms:.1f} |",
        f"| durable sleep of {SLEEP_S:g} s: step running again after its wake time, median (max) of "
        f"{len(late)} | {_ms(late, 0.5):.0f} ms ({max(late) * 1000:.0f} ms) | |",
        *_approval_rows(result["approvals"], rtt_ms),
        "",
        *_side_by_side(m, result["approvals"]),
    ]
    return "\n".join(rows)


def _approval_rows(a: dict[str, Any], rtt_ms: float) -> list[str]:
    wake, step, call = a["wake"], a["step"], a["call"]
    return [
        "| approval (`Client.resolve_event`) to the waiting step running again, median (p90) of "
        f"{len(step)} | {_ms(step, 0.5):.1f} ms ({_ms(step, 0.9):.1f} ms) | "
        f"{_ms(step, 0.5) / rtt_ms:.0f} (target: 10) |",
        f"| approval (`Client.resolve_event`) to the approved tool running, median (p90) of {len(wake)} | "
        f"{_ms(wake, 0.5):.1f} ms ({_ms(wake, 0.9):.1f} ms) | {_ms(wake, 0.5) / rtt_ms:.0f} |",
        f"| `Client.resolve_event` call itself, median | {_ms(call, 0.5):.2f} ms | "
        f"{_ms(call, 0.5) / rtt_ms:.1f} |",
    ]


def _side_by_side(signal: dict[str, Any], approval: dict[str, Any]) -> list[str]:
    """A waiting run's memory, a signal wait's against an approval's (pydantic-ai's agent waiting
    for its tool's approval), in the same run of the benchmark."""
    names = [k.removeprefix("key_") for k in signal if k.startswith("key_")]
    shown = [n for n in names if signal[f"key_{n}"] or approval["keys"].get(n)]
    return [
        f"A waiting run's Redis memory: a signal wait against an approval ({len(approval['wake'])} "
        "agent runs whose tool requires approval, waiting at once).",
        "",
        "| per waiting run | signal wait | approval wait |",
        "|---|---|---|",
        f"| `used_memory` growth / runs | {signal['per_run']:.0f} B | {approval['per_run']:.0f} B |",
        f"| its own keys (`MEMORY USAGE` summed) | {signal['own_keys']} B | {approval['own_keys']} B |",
        *(f"| … `{n}` | {signal[f'key_{n}']} B | {approval['keys'].get(n, 0)} B |" for n in shown),
    ]
