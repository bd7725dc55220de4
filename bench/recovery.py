"""Recovery: SIGKILL a whole worker mid-step, and time until the step runs again elsewhere.

Two fleet workers (``-c 1``) with a short lease TTL. The ``recover`` graph's slow step
RPUSHes its start (wall clock, worker pid, attempt) to Redis; once attempt 1 has started,
the benchmark kills that worker's process group and waits for attempt 2's start. The time
between the kill and that start is the recovery time. Its Celery message stays unacked
until the broker's visibility timeout, so without the lease and the reaper recovery would
take that long. A replacement worker is started, outside the timed part, before the next
repetition.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import fleet_graph
from bench.procs import BenchError, Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.local_processes import Worker
from reflexr_graph.store import keys

QUEUE = "bench-recover"
LEASE_TTL_S = 3.0
KILL_AFTER_S = 0.5
"""How far into the slow step the kill lands."""
ENV = {"REFLEXR_LEASE_TTL_S": str(LEASE_TTL_S)}


def _starts(client: Client, run_id: str) -> list[dict[str, Any]]:
    raw = client.store.client.lrange(fleet_graph.starts_key(run_id), 0, -1)
    return [json.loads(item) for item in raw]


def _one(lab: Lab, client: Client, workers: dict[int, Worker]) -> dict[str, Any]:
    run_id = client.enqueue(fleet_graph.recover.name, {"sleep_s": 120.0})
    first = wait_for(lambda: _starts(client, run_id), 60, "the slow step to start", 0.01)[0]
    victim = workers.pop(first["worker"], None)
    if victim is None:
        raise BenchError(f"the step ran in an unknown worker (pid {first['worker']})")
    time.sleep(KILL_AFTER_S)
    # The reaper that acts on the run's shard.
    lock = client.store.client.get(keys.reaper_lock(client.store.shards.of(run_id))) or b""
    held_lock = f":{victim.pid}:" in lock.decode()
    t_kill = time.time()
    victim.kill()
    again = wait_for(lambda: _starts(client, run_id)[1:], 120, "the step to run again", 0.01)[0]
    if again["worker"] not in workers:
        raise BenchError("the step ran again in an unexpected process")
    client.wait(run_id, timeout=60)
    return {"recovery_s": again["t"] - t_kill, "reaper_was_killed": held_lock}


def run(lab: Lab, reps: int = 5, progress: Callable[[str], None] = print) -> dict[str, Any]:
    started = [lab.start_worker("workers", QUEUE, 1, ENV) for _ in range(2)]
    lab.wait_ready(*started)
    workers = {w.pid: w for w in started}
    settings = load_settings(redis_url=lab.url, queue=QUEUE, lease_ttl_s=LEASE_TTL_S)
    samples = []
    try:
        with Client(settings) as client:
            for rep in range(reps):
                samples.append(_one(lab, client, workers))
                progress(
                    f"  rep {rep + 1}/{reps}: step ran again {samples[-1]['recovery_s']:.2f}s after kill"
                )
                if rep < reps - 1:  # back to two workers, outside the timed part
                    fresh = lab.start_worker("workers", QUEUE, 1, ENV)
                    lab.wait_ready(fresh)
                    workers[fresh.pid] = fresh
    finally:
        lab.stop_workers()
    return {
        "reps": reps,
        "samples": samples,
        "lease_ttl_s": LEASE_TTL_S,
        "visibility_timeout_s": settings.visibility_timeout_s,
        "kill_after_s": KILL_AFTER_S,
    }


def render(result: dict[str, Any]) -> str:
    times = [s["recovery_s"] for s in result["samples"]]
    ttl = result["lease_ttl_s"]
    vis = result["visibility_timeout_s"]
    med = statistics.median(times)
    lines = [
        f"Two fleet workers (`-c 1`), `REFLEXR_LEASE_TTL_S={ttl:g}`, broker visibility timeout "
        f"{vis:g} s (the default). Each repetition SIGKILLs the process group of the worker running "
        f"the slow step, {result['kill_after_s']:g} s into it, and times until the step starts "
        f"again on the other worker; {result['reps']} repetitions.",
        "",
        "| rep | kill → step runs again (s) | / lease TTL | killed worker held the reaper lock |",
        "|---|---|---|---|",
    ]
    for i, s in enumerate(result["samples"], 1):
        held = "yes" if s["reaper_was_killed"] else "no"
        lines.append(f"| {i} | {s['recovery_s']:.2f} | {s['recovery_s'] / ttl:.2f} | {held} |")
    lines += [
        "",
        f"Recovery: median {med:.2f} s [{min(times):.2f}-{max(times):.2f}] = "
        f"{med / ttl:.2f}× the lease TTL, {med / vis:.5f}× the visibility timeout.",
    ]
    return "\n".join(lines)
