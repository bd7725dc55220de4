"""The demo's phases on a running fleet: a worker SIGKILLed mid-step, a poison run replayed, and a run
that waits for a person, woken by a signal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live

from reflexr_graph.client import Client
from reflexr_graph.demo.processes import RUN_DIR, Fleet
from reflexr_graph.demo.scenario import RunSpec
from reflexr_graph.demo.view import live_view, step_counts
from reflexr_graph.errors import Kind, ReflexrError
from reflexr_graph.local_processes import Worker
from reflexr_graph.model import TERMINAL, RunInfo, Status
from reflexr_graph.store import keys

PHASE_TIMEOUT_S = 90.0
REPORT_STEPS = ("escalate", "file")
"""triage's last steps, one per verdict; crash-me's is slowed down so a worker can be killed in it."""


def say(console: Console, message: str) -> None:
    console.print(f"[bold cyan]>[/] {message}")


class DemoFailed(ReflexrError):
    """A phase of the demo did not reach what it waits for in time."""

    error_kind = Kind.TIMEOUT


@dataclass
class Demo:
    client: Client
    fleet: Fleet
    specs: list[RunSpec]
    """The runs enqueued so far, as the live view shows them."""
    live: Live
    batch: list[RunSpec] = field(default_factory=list)
    """Every run of the demo, enqueued or not."""

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

    def spec_of(self, role: str) -> RunSpec:
        """The spec of ``role`` among every run of the batch, enqueued or not."""
        return next(s for s in self.batch if s.role == role)

    def holder(self, run_id: str) -> Worker:
        """The worker whose attempt holds the run, from the run's latest attempt_started event."""
        started = [e for e in self.client.store.events(run_id) if e.type == "attempt_started"]
        name = started[-1].fields.get("worker", "").split("@")[0]
        return next(w for w in self.fleet.workers if w.name == name)

    def in_report_step(self, run_id: str, info: RunInfo) -> bool:
        """The run's report step has started: its checkpoint names it, and its code has run."""
        node = info.next_node
        return info.status is Status.RUNNING and node in REPORT_STEPS and node in self.executions(run_id)


def crash_one(demo: Demo, console: Console) -> None:
    """SIGKILL the worker running crash-me's report step; another worker resumes it from its checkpoint."""
    crash = demo.spec("crash")
    demo.wait(
        "running; waiting for crash-me to start its (slow) report step",
        lambda i: demo.in_report_step(crash.run_id, i[crash.run_id]),
    )
    in_flight = demo.client.get(crash.run_id).next_node or ""
    victim = demo.holder(crash.run_id)
    before = demo.executions(crash.run_id)
    victim.kill()
    killed_at = time.monotonic()
    crash.notes.append(f"{victim.name} SIGKILLed during {in_flight}")
    demo.wait(
        "crash-me: waiting for another worker to resume it",
        lambda i: i[crash.run_id].status in TERMINAL or i[crash.run_id].attempts > 1,
    )
    resumed_after = time.monotonic() - killed_at
    demo.wait("crash-me: finishing on the other worker", lambda i: i[crash.run_id].status in TERMINAL)
    after = demo.executions(crash.run_id)
    done = {k: v for k, v in before.items() if k != in_flight}
    repeated = sum(after.get(k, 0) - v for k, v in done.items())
    crash.notes.append(f"resumed in {resumed_after:.1f}s")
    say(
        console,
        f"SIGKILLed worker {victim.name} (pid {victim.pid}) while crash-me's {in_flight} step (its report, "
        f"slowed down for the demo) was running. The other worker resumed it {resumed_after:.1f}s later "
        f"from the checkpoint saved before {in_flight}: of the {sum(done.values())} step executions done "
        f"before the crash ({step_counts(done)}), {repeated} ran again; only {in_flight}, the step in "
        f"flight, ran again ({after.get(in_flight, 0)} times in all).",
    )


def poison_and_replay(demo: Demo, console: Console, redis_url: str, queue: str) -> None:
    """Let the poison run be dead-lettered, fix its cause, and replay it through the real CLI."""
    from workers.examples.triage import FIXED_KEY

    poison = demo.spec("poison")
    demo.wait("poison: failing until dead-lettered", lambda i: i[poison.run_id].status is Status.DEAD)
    info = demo.client.get(poison.run_id)
    poison.attempts_before_replay = info.attempts
    poison.notes.append(f"dead after {info.attempts} attempts")
    say(console, f"poison was dead-lettered after {info.attempts} attempts (reason {info.reason})")
    demo.client.store.client.set(FIXED_KEY, "1")
    _cli(redis_url, queue, "dlq", "replay", poison.run_id, "--yes")
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
        f"{info.attempts} attempts and the replay, which started a fresh budget of attempts",
    )


def wait_for_on_call(demo: Demo, console: Console) -> None:
    """The on-call run pages on-call from its escalate step, then waits, holding no worker."""
    page = demo.spec_of("approval")
    demo.specs.append(page)
    demo.wait("on-call: classifying, then paging on-call", lambda i: i[page.run_id].status is Status.WAITING)
    info = demo.client.get(page.run_id)
    leased = (
        demo.client.store.client.zscore(keys.leases(demo.client.store.shards.of(page.run_id)), page.run_id)
        is not None
    )
    page.notes.append(f"waited for {info.waiting_for}")
    say(
        console,
        f"on-call paged on-call from its escalate step and is {info.status.value} for the signal "
        f"{info.waiting_for!r}: it holds {'a lease' if leased else 'no worker and no queue message'}, only "
        "its record in Redis, while the rest of the demo runs",
    )


def approve_on_call(demo: Demo, console: Console, redis_url: str, queue: str) -> None:
    """The real CLI sends the approval signal; the run resumes from the checkpoint before escalate."""
    page = demo.spec("approval")
    value = '{"approved": true, "by": "on-call"}'
    _cli(redis_url, queue, "signal", page.run_id, "approval", "--value", value)
    page.notes.append("approved by signal")
    say(console, f"on-call answered: reflexr-graph signal {page.run_id} approval --value '{value}'")
    demo.wait("on-call: woken by the signal, escalating", lambda i: i[page.run_id].status in TERMINAL)
    done = demo.client.get(page.run_id)
    steps = demo.executions(page.run_id)
    approval = done.output.get("approval") if isinstance(done.output, dict) else None
    say(
        console,
        f"on-call {done.status.value} ({approval}) on attempt {done.attempts}: the wait did not count, the "
        "run resumed from its checkpoint before escalate, and the page (a durable call) was made "
        + ("once" if steps.get("page") == 1 else f"{steps.get('page', 0)} times"),
    )


def _cli(redis_url: str, queue: str, *args: str) -> None:
    """Run ``reflexr-graph ARGS...`` as an operator would, against the demo's Redis and queue."""
    env = {**os.environ, "REFLEXR_REDIS_URL": redis_url, "REFLEXR_QUEUE": queue}
    subprocess.run(
        [sys.executable, "-m", "reflexr_graph", *args], env=env, check=True, capture_output=True, timeout=60
    )
