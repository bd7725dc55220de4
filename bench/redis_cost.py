"""What one run costs the Redis server, durable against plain Celery, and the fleet's cost per step.

**Server cost per run.** One worker at a time runs on the lab's Redis (so one path's idle
traffic is never counted in the other's), warmed up first: the durable ``five_steps`` run
through the fleet (``Client.enqueue``, the claim, five checkpoints, the success, the reaper and
the heartbeats around them), then the same graph as one plain Celery task (``bench.plain``:
``graph.run`` and one INCR to count it done). Around each batch, ``CONFIG RESETSTAT`` and ``INFO
commandstats`` give the commands Redis ran (those inside Lua included) and their time, and
``INFO cpu`` the server process's CPU time (user + sys: command execution plus networking and
the event loop). The benchmark's own completion polls are taken out of both, and the CPU
figure is also given net of the worker's idle background (reaper ticks, heartbeats, broker
polls), measured for a few seconds before each batch: that costs per second, not per run.

**Cost per step inside a worker.** ``chain50`` and ``chain1`` runs one at a time on a fleet
worker (heartbeat, spans and metrics as deployed); the worker-side time of a run is from its
``attempt_started`` event to its ``run_succeeded`` event, and the difference divided by 49 is
what each step costs there, set against a PING in a hot loop from the benchmark. The benchmark
polls each run's status every 50 ms meanwhile, so its own waiting takes no core from the worker.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from bench import baseline_app, fleet_graph
from bench.procs import Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from reflexr_graph.store import fanout, keys

QUEUE = "bench-cost"
POLL_S = 0.02
FINISH_POLL_S = 0.05
"""How often the per-step measure looks whether its run finished (the time comes from its events)."""
TARGET_ADDED = 1.0


@dataclass(frozen=True)
class ServerCost:
    commands: float
    command_us: float
    """Commandstats time: a script's includes the commands it runs, which count on their own too."""
    cpu_us: float
    """Server CPU per run, net of the idle background."""
    gross_cpu_us: float


def _cpu_us(r: redis.Redis) -> float:
    cpu: dict[str, Any] = r.info("cpu")
    return (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e6


IDLE_S = 3.0
"""How long each path's idle background (reaper, heartbeats, broker polls) is measured by default."""


def _idle_cpu_us_per_s(r: redis.Redis, idle_s: float) -> float:
    """Server CPU per second while the worker is idle: its background, whatever the runs."""
    cpu0, t0 = _cpu_us(r), time.perf_counter()
    time.sleep(idle_s)  # a measurement window, not a wait for a condition
    return (_cpu_us(r) - cpu0) / (time.perf_counter() - t0)


def _measured(
    r: redis.Redis, runs: int, batch: Callable[[], int], poll_command: str, idle_s: float
) -> ServerCost:
    """Server cost per run of ``batch`` (which returns how many completion polls it made).

    ``cpu_us`` is net of the path's idle background over the batch's duration: a worker's
    reaper and heartbeats cost the same per second however many runs go by, so counting them
    per run would make a slow batch (a noisy neighbour) look like a costly run.
    """
    idle_rate = _idle_cpu_us_per_s(r, idle_s)
    r.config_resetstat()
    cpu0, t0 = _cpu_us(r), time.perf_counter()
    polls = batch()
    elapsed = time.perf_counter() - t0
    cpu = _cpu_us(r) - cpu0
    stats: dict[str, Any] = r.info("commandstats")
    calls = usec = 0.0
    for name, s in stats.items():
        if name in ("cmdstat_config", "cmdstat_info"):
            continue
        n, us = float(s["calls"]), float(s["usec"])
        if name == f"cmdstat_{poll_command}":
            # The benchmark's polls are not the path's cost: take out their share.
            us -= us * min(polls, n) / n
            n -= min(polls, n)
        calls, usec = calls + n, usec + us
    poll_cpu = usec / calls * polls if calls else 0.0  # a poll costs about an average command
    net = cpu - poll_cpu - idle_rate * elapsed
    return ServerCost(calls / runs, usec / runs, max(net, 0.0) / runs, cpu / runs)


def _poll(condition: Callable[[], bool]) -> int:
    polls = 0
    deadline = time.monotonic() + 300
    while True:
        polls += 1
        if condition():
            return polls
        if time.monotonic() > deadline:
            raise TimeoutError("batch did not finish")
        time.sleep(POLL_S)


def _durable(lab: Lab, r: redis.Redis, runs: int, reps: int, idle_s: float) -> list[ServerCost]:
    worker = lab.start_worker("workers", QUEUE, 1)
    lab.wait_ready(worker)
    done = partial(keys.status_set, Status.SUCCEEDED)
    try:
        with Client(load_settings(redis_url=lab.url, queue=QUEUE)) as client:

            def batch(n: int) -> int:
                target = fanout.total(r, done) + n
                for i in range(n):
                    client.enqueue(baseline_app.five_steps.name, i)
                return _poll(lambda: fanout.total(r, done) >= target)

            batch(max(5, runs // 10))  # warm up
            return [_measured(r, runs, lambda: batch(runs), "zcard", idle_s) for _ in range(reps)]
    finally:
        lab.stop_workers()


def _plain(lab: Lab, r: redis.Redis, runs: int, reps: int, idle_s: float) -> list[ServerCost]:
    worker = lab.start_worker("bench.baseline_app", QUEUE, 1)
    lab.wait_ready(worker)
    # One producer for every batch: warmed up, reusing its connection, as a service would.
    producer = baseline_app.make_app(load_settings(redis_url=lab.url, queue=QUEUE))
    try:

        def batch(n: int) -> int:
            counter = f"bench:done:{uuid.uuid4().hex}"
            for _ in range(n):
                baseline_app.send_plain(producer, counter, QUEUE)
            return _poll(lambda: int(r.get(counter) or 0) >= n)

        batch(max(5, runs // 10))
        return [_measured(r, runs, lambda: batch(runs), "get", idle_s) for _ in range(reps)]
    finally:
        producer.close()
        lab.stop_workers()


def _worker_side_ms(client: Client, graph: str) -> float:
    run_id = client.enqueue(graph, 0)
    # A coarse status poll rather than Client.wait: that one reads the run's events as they come,
    # one wake per step, and on a small machine its wakes take the cores the worker is timed on.
    # The time is the events' own, so a slow poll adds nothing to it.
    wait_for(lambda: client.get(run_id).status is Status.SUCCEEDED, 60, f"run {run_id}", FINISH_POLL_S)
    events = {e.type: e.at for e in client.events(run_id)}
    return (events["run_succeeded"] - events["attempt_started"]) * 1000


def _per_step(lab: Lab, r: redis.Redis, reps: int) -> dict[str, float]:
    worker = lab.start_worker("workers", QUEUE, 1)
    lab.wait_ready(worker)
    try:
        with Client(load_settings(redis_url=lab.url, queue=QUEUE)) as client:
            for graph in (fleet_graph.fifty_steps.name, fleet_graph.one_step.name):
                _worker_side_ms(client, graph)  # warm up
            t50 = [_worker_side_ms(client, fleet_graph.fifty_steps.name) for _ in range(reps)]
            t1 = [_worker_side_ms(client, fleet_graph.one_step.name) for _ in range(reps)]
    finally:
        lab.stop_workers()
    pings = []
    for _ in range(2000):
        t0 = time.perf_counter()
        r.ping()
        pings.append(time.perf_counter() - t0)
    step_us = (statistics.median(t50) - statistics.median(t1)) / 49 * 1000
    return {"t50_ms": statistics.median(t50), "t1_ms": statistics.median(t1), "step_us": step_us,
            "ping_us": statistics.median(pings) * 1e6}  # fmt: skip


def run(
    lab: Lab, runs: int, reps: int, progress: Callable[[str], None] = print, idle_s: float = IDLE_S
) -> dict[str, Any]:
    r = lab.redis.client()
    try:
        durable = _durable(lab, r, runs, reps, idle_s)
        progress(f"  durable: {statistics.median(c.cpu_us for c in durable):.0f} server CPU µs per run")
        plain = _plain(lab, r, runs, reps, idle_s)
        progress(f"  plain: {statistics.median(c.cpu_us for c in plain):.0f} server CPU µs per run")
        step = _per_step(lab, r, max(reps * 5, 5))
        progress(f"  per step in a worker: {step['step_us']:.0f} µs, PING {step['ping_us']:.0f} µs")
    finally:
        r.close()
    return {"runs": runs, "reps": reps, "durable": durable, "plain": plain, "step": step}


def _med(costs: list[ServerCost], attr: str) -> float:
    return statistics.median(getattr(c, attr) for c in costs)


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**MISSED**"


def render(result: dict[str, Any]) -> str:
    d, p, step = result["durable"], result["plain"], result["step"]
    lines = [
        f"{result['runs']} runs per batch, {result['reps']} batches per path, one worker (`-c 1`) at a time "
        "on the same Redis, warmed up; the plain producer reuses one connection. Per run, median "
        "[min-max] over batches.",
        "",
        "| path | commands | command µs (commandstats; a script's includes its commands) "
        "| server CPU µs (INFO cpu), net of idle "
        "| gross | runs/s one Redis core sustains |",
        "|---|---|---|---|---|---|",
    ]
    for name, costs in (("durable (fleet)", d), ("plain Celery task", p)):
        cpu = [c.cpu_us for c in costs]
        mid = statistics.median(cpu)
        lines.append(
            f"| {name} | {_med(costs, 'commands'):.1f} | {_med(costs, 'command_us'):.0f} | "
            f"{mid:.0f} [{min(cpu):.0f}-{max(cpu):.0f}] | {_med(costs, 'gross_cpu_us'):.0f} | "
            f"{1e6 / mid:,.0f} |"
        )
    added = (_med(d, "cpu_us") - _med(p, "cpu_us")) / _med(p, "cpu_us")
    per_rtt = step["step_us"] / step["ping_us"]
    lines += [
        "",
        f"- durable / plain server CPU per run: {_med(d, 'cpu_us') / _med(p, 'cpu_us'):.2f}; "
        "the durable path's "
        f"*added* Redis CPU is {added:.2f}× Celery's own per task "
        f"(target ≤ {TARGET_ADDED:g}×: {_verdict(added <= TARGET_ADDED)})",
        f"- per step inside a fleet worker: 50-step run {step['t50_ms']:.1f} ms, "
        f"1-step run {step['t1_ms']:.1f} ms worker-side, so {step['step_us']:.0f} µs per step = "
        f"{per_rtt:.1f} hot-loop PINGs "
        f"({step['ping_us']:.0f} µs)",
    ]
    return "\n".join(lines)
