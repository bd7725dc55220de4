"""``reflexr-graph demo`` (``make run``): the real system on an embedded default, in about a minute.

It starts a private Redis (AOF on, data under .run/) unless REFLEXR_REDIS_URL names one,
starts two worker processes, and enqueues a batch of document-triage runs. Then it
SIGKILLs the worker that holds one run in the middle of a step and shows that run
resume on the other worker from its checkpoint, lets a poison run be dead-lettered,
"fixes" it and replays it through the real CLI, and ends with a summary. Every process
it started is stopped, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live

from reflexr_graph.client import Client
from reflexr_graph.demo.processes import RUN_DIR, Fleet, Worker, private_redis, worker_env
from reflexr_graph.demo.scenario import RunSpec, batch
from reflexr_graph.demo.view import live_view, summary
from reflexr_graph.errors import ReflexrError, UnknownGraph
from reflexr_graph.fleet.settings import load_settings
from reflexr_graph.model import TERMINAL, RunInfo, Status

QUEUE = "reflexr-demo"
WORKER_SETTINGS = {
    # The bundled example is loaded only where asked for, as a user's graph would be.
    "REFLEXR_GRAPHS": "workers.examples.triage:triage",
    "REFLEXR_QUEUE": QUEUE,
    "REFLEXR_LEASE_TTL_S": "3",
    "REFLEXR_MAX_ATTEMPTS": "3",
    "REFLEXR_RETRY_BACKOFF_S": "0.5",
    "REFLEXR_RETRY_BACKOFF_MAX_S": "2",
    "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S": "5",
}
PHASE_TIMEOUT_S = 90.0
REPORT_STEPS = ("escalate", "file")


def say(console: Console, message: str) -> None:
    console.print(f"[bold cyan]>[/] {message}")


class DemoFailed(ReflexrError):
    """A phase of the demo did not reach what it waits for in time."""


@dataclass
class Demo:
    client: Client
    fleet: Fleet
    specs: list[RunSpec]
    live: Live

    def infos(self) -> dict[str, RunInfo]:
        return {s.run_id: self.client.get(s.run_id) for s in self.specs}

    def executions(self, run_id: str) -> dict[str, int]:
        from workers.examples.triage import executions

        return executions(self.client.store.client, run_id)

    def refresh(self, phase: str) -> dict[str, RunInfo]:
        infos = self.infos()
        totals = {s.run_id: sum(self.executions(s.run_id).values()) for s in self.specs}
        self.live.update(live_view(phase, self.specs, infos, totals))
        return infos

    def wait(
        self, phase: str, done: Callable[[dict[str, RunInfo]], bool], timeout: float = PHASE_TIMEOUT_S
    ) -> None:
        """Refresh the view until ``done`` holds; the view polls, the runs themselves never wait on it."""
        deadline = time.monotonic() + timeout
        while not done(self.refresh(phase)):
            if time.monotonic() > deadline:
                raise DemoFailed(
                    f"the demo waited {timeout:.0f}s for: {phase}; worker logs are in {RUN_DIR}/"
                )
            time.sleep(0.2)

    def spec(self, role: str) -> RunSpec:
        return next(s for s in self.specs if s.role == role)

    def holder(self, run_id: str) -> Worker:
        """The worker whose attempt holds the run, from the run's latest attempt_started event."""
        started = [e for e in self.client.store.events(run_id) if e.type == "attempt_started"]
        name = started[-1].fields.get("worker", "").split("@")[0]
        return next(w for w in self.fleet.workers if w.name == name)


def _wait_for_graph(client: Client, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.graph(name)
            return
        except UnknownGraph:
            if time.monotonic() > deadline:
                raise DemoFailed(f"no worker published the {name!r} graph within {timeout:.0f}s") from None
            time.sleep(0.2)


def _crash_one(demo: Demo, console: Console) -> None:
    crash = demo.spec("crash")
    demo.wait(
        "running; waiting for crash-me to start its (slow) report step",
        lambda i: i[crash.run_id].status is Status.RUNNING and i[crash.run_id].next_node in REPORT_STEPS,
    )
    victim = demo.holder(crash.run_id)
    before = demo.executions(crash.run_id)
    victim.kill()
    killed_at = time.monotonic()
    crash.notes.append(f"{victim.name} SIGKILLed mid-report")
    demo.wait(
        "crash-me: waiting for another worker to resume it",
        lambda i: i[crash.run_id].status in TERMINAL or i[crash.run_id].attempts > 1,
    )
    resumed_after = time.monotonic() - killed_at
    demo.wait("crash-me: finishing on the other worker", lambda i: i[crash.run_id].status in TERMINAL)
    after = demo.executions(crash.run_id)
    kept = sum(v for k, v in before.items() if k not in REPORT_STEPS)
    repeated = sum(after.get(k, 0) - before.get(k, 0) for k in before if k not in REPORT_STEPS)
    crash.notes.append(f"resumed in {resumed_after:.1f}s")
    say(
        console,
        f"SIGKILLed worker {victim.name} (pid {victim.pid}) in the middle of crash-me's report step. "
        f"The other worker resumed it {resumed_after:.1f}s later from its checkpoint: of the {kept} step "
        f"executions done before the crash, {repeated} ran again; only the report in flight was repeated.",
    )


def _poison_and_replay(demo: Demo, console: Console, redis_url: str) -> None:
    from workers.examples.triage import FIXED_KEY

    poison = demo.spec("poison")
    demo.wait("poison: failing until dead-lettered", lambda i: i[poison.run_id].status is Status.DEAD)
    info = demo.client.get(poison.run_id)
    poison.notes.append(f"dead after {info.attempts} attempts")
    say(console, f"poison was dead-lettered after {info.attempts} attempts (reason {info.reason})")
    demo.client.store.client.set(FIXED_KEY, "1")
    env = {**os.environ, "REFLEXR_REDIS_URL": redis_url, "REFLEXR_QUEUE": QUEUE}
    cli = [sys.executable, "-m", "reflexr_graph", "dlq", "replay", poison.run_id, "--yes"]
    subprocess.run(cli, env=env, check=True, capture_output=True, timeout=60)
    poison.notes.append("fixed, replayed")
    say(
        console,
        f"fixed its cause (SET {FIXED_KEY} 1) and ran: reflexr-graph dlq replay {poison.run_id} --yes",
    )
    demo.wait("poison: replayed, resuming from its checkpoint", lambda i: i[poison.run_id].status in TERMINAL)
    plan_runs = demo.executions(poison.run_id).get("plan", 0)
    say(
        console,
        f"poison finished from its checkpoint: its plan step ran {plan_runs}x across "
        f"{info.attempts} attempts and the replay",
    )


@contextlib.contextmanager
def _redis() -> Iterator[str]:
    url = os.environ.get("REFLEXR_REDIS_URL")
    if url:
        yield url
        return
    with private_redis() as server:
        yield server.url


def run_demo(console: Console | None = None) -> int:
    """Run the showcase; 0 when every run succeeded, 1 otherwise."""
    console = console or Console()
    RUN_DIR.mkdir(exist_ok=True)
    with _redis() as url:
        fleet = Fleet(worker_env(url, WORKER_SETTINGS))
        try:
            return _showcase(console, fleet, url)
        finally:
            say(console, "stopping the workers (SIGTERM, soft shutdown)")
            fleet.stop()


def _showcase(console: Console, fleet: Fleet, url: str) -> int:
    from workers.examples.triage import FIXED_KEY

    say(console, f"Redis at {url.split('@')[-1]}; starting two workers (logs in {RUN_DIR}/)")
    for name in ("demo-a", "demo-b"):
        fleet.start_worker(name)
    max_attempts = int(WORKER_SETTINGS["REFLEXR_MAX_ATTEMPTS"])
    client = Client(load_settings(redis_url=url, queue=QUEUE, max_attempts=max_attempts))
    _wait_for_graph(client, "triage")
    client.store.client.delete(FIXED_KEY)
    specs = batch()
    for spec in specs:
        spec.run_id = client.enqueue("triage", spec.inputs)
    say(console, f"enqueued {len(specs)} document-triage runs")
    with Live(console=console, refresh_per_second=8, transient=True) as live:
        demo = Demo(client, fleet, specs, live)
        _crash_one(demo, console)
        _poison_and_replay(demo, console, url)
        demo.wait("finishing the batch", lambda i: all(x.status in TERMINAL for x in i.values()))
    infos = demo.infos()
    console.print(summary(specs, infos, {s.run_id: demo.executions(s.run_id) for s in specs}))
    ok = all(info.status is Status.SUCCEEDED for info in infos.values())
    say(console, "every run succeeded" if ok else "some runs did not succeed: see the table above")
    return 0 if ok else 1
