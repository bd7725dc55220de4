"""Throughput and scaling: 200 runs of a five-step graph, through the fleet and two baselines.

Four paths, all alive at once on one Redis and interleaved within each repetition, so a
noisy neighbour hits them alike:

* ``durable -c 2``: ``Client.enqueue`` of the ``five_steps`` GraphAction to a fleet worker
  with 2 prefork processes (validation, run record, message; claim, 5 checkpoints, finish).
* ``plain -c 2``: one Celery task per run that calls ``graph.run`` on the same graph, sent by
  one producer that every batch reuses (warmed up, its connection open).
* ``chain -c 2``: a Celery chain of five tasks per run, one per step, passing the value on.
* ``durable -c 1``: the fleet path on a worker with 1 process, for the scaling ratio.

Every worker uses the fleet's Celery settings (JSON, acks_late, prefetch 1). Wall time runs
from the first enqueue until the last run is done: for the fleet, the count of the
``succeeded`` status set; for the baselines, a counter the last task INCRs. Both are polled
with one Redis command every 5 ms.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from celery import Celery

from bench import baseline_app
from bench.procs import Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from reflexr_graph.store import fanout, keys

GRAPH = baseline_app.five_steps.name
BATCH_TIMEOUT_S = 300.0
TARGET_VS_PLAIN = 0.8
TARGET_VS_CHAIN = 2.0


def _fleet_batch(client: Client, runs: int) -> float:
    r = client.store.client
    done = partial(keys.status_set, Status.SUCCEEDED)
    target = fanout.total(r, done) + runs
    t0 = time.perf_counter()
    for i in range(runs):
        client.enqueue(GRAPH, i)
    wait_for(lambda: fanout.total(r, done) >= target, BATCH_TIMEOUT_S, f"{runs} durable runs")
    return time.perf_counter() - t0


def _baseline_batch(lab: Lab, producer: Celery, send: Callable[..., None], queue: str, runs: int) -> float:
    """One batch through ``producer``, which every batch reuses: warmed up, its connection open,
    as a service that sends tasks all day would have it."""
    r = lab.redis.client()
    counter = f"bench:done:{uuid.uuid4().hex}"
    try:
        t0 = time.perf_counter()
        for _ in range(runs):
            send(producer, counter, queue)
        wait_for(lambda: int(r.get(counter) or 0) >= runs, BATCH_TIMEOUT_S, f"{runs} baseline runs")
        return time.perf_counter() - t0
    finally:
        r.close()


def _start(lab: Lab) -> tuple[Client, Client]:
    """Start the three workers in parallel; returns the clients of the -c 2 and -c 1 fleet queues."""
    workers = [
        lab.start_worker("workers", "bench-durable2", 2),
        lab.start_worker("workers", "bench-durable1", 1),
        lab.start_worker("bench.baseline_app", "bench-base", 2),
    ]
    lab.wait_ready(*workers)
    return (
        Client(load_settings(redis_url=lab.url, queue="bench-durable2")),
        Client(load_settings(redis_url=lab.url, queue="bench-durable1")),
    )


def run(lab: Lab, runs: int = 200, reps: int = 3, progress: Callable[[str], None] = print) -> dict[str, Any]:
    c2, c1 = _start(lab)
    producer = baseline_app.make_app(load_settings(redis_url=lab.url, queue="bench-base"))
    paths: dict[str, Callable[[int], float]] = {
        "durable -c 2": lambda n: _fleet_batch(c2, n),
        "plain -c 2": lambda n: _baseline_batch(lab, producer, baseline_app.send_plain, "bench-base", n),
        "chain -c 2": lambda n: _baseline_batch(lab, producer, baseline_app.send_chain, "bench-base", n),
        "durable -c 1": lambda n: _fleet_batch(c1, n),
    }
    try:
        for measure in paths.values():  # warm up: pool children import and connect lazily
            measure(max(4, runs // 10))
        times: dict[str, list[float]] = {name: [] for name in paths}
        for rep in range(reps):
            for name, measure in paths.items():
                times[name].append(measure(runs))
                progress(f"  rep {rep + 1}/{reps} {name}: {runs / times[name][-1]:.0f} runs/s")
    finally:
        producer.close()
        c2.close()
        c1.close()
        lab.stop_workers()
    return {"runs": runs, "reps": reps, "times": times}


def _ratio(result: dict[str, Any], num: str, den: str) -> list[float]:
    """Throughput ratio num/den per repetition: both measured in the same repetition."""
    t = result["times"]
    return [d / n for n, d in zip(t[num], t[den], strict=True)]


def summary(values: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def ratios(result: dict[str, Any]) -> dict[str, list[float]]:
    return {
        "durable / plain": _ratio(result, "durable -c 2", "plain -c 2"),
        "durable / chain": _ratio(result, "durable -c 2", "chain -c 2"),
        "scaling -c 2 / -c 1": _ratio(result, "durable -c 2", "durable -c 1"),
    }


def _verdict(values: list[float], target: float) -> str:
    med = statistics.median(values)
    return f"target ≥ {target:g}×: **{'met' if med >= target else 'MISSED'}**"


def render(result: dict[str, Any]) -> str:
    t, n = result["times"], result["runs"]
    lines = [
        f"{n} runs of a five-step graph per path per repetition, {result['reps']} repetitions, paths "
        "interleaved; runs/s median [min-max]. Ratios are taken within each repetition.",
        "",
        "| path | runs/s |",
        "|---|---|",
    ]
    for name, times in t.items():
        lines.append(f"| {name} | {summary([n / x for x in times], '.0f')} |")
    r = ratios(result)
    lines += [
        "",
        f"- durable / plain throughput: {summary(r['durable / plain'])} "
        f"({_verdict(r['durable / plain'], TARGET_VS_PLAIN)})",
        f"- durable / chain throughput: {summary(r['durable / chain'])} "
        f"({_verdict(r['durable / chain'], TARGET_VS_CHAIN)})",
    ]
    return "\n".join(lines)


def render_scaling(result: dict[str, Any], cores: int | None) -> str:
    r = ratios(result)["scaling -c 2 / -c 1"]
    return (
        f"This machine has {cores} cores (`os.cpu_count()`); Redis, the client and the worker's main "
        "process share them with the pool.\n\n"
        f"- durable throughput -c 2 / -c 1: {summary(r)} (same runs as the throughput table)"
    )
