"""Stopping a worker with SIGTERM, started either way (``celery -A workers worker`` or
``reflexr-graph worker``) and without REMAP_SIGTERM in its environment: mid-step it does the soft
shutdown (the lease released, the run resumes elsewhere); idle, it exits at once. However it stops
(short of SIGKILL), it leaves the registry before it exits."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import ENTRY_POINTS, Fleet, executions, open_gate
from tests.waiting import wait_for

ENTRIES = sorted(ENTRY_POINTS)
REEXEC_LINE = "re-executing this worker with REMAP_SIGTERM=SIGQUIT"


def reaper_pid(log: str) -> int:
    """The pid in the reaper's start line: the process that runs after any re-exec."""
    found = re.search(r"reaper \S+:(\d+):\w+ started", log)
    assert found, "the reaper's start line"
    return int(found.group(1))


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("entry", ENTRIES)
def test_sigterm_mid_step_releases_the_lease_and_the_run_resumes_elsewhere(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, entry: str
) -> None:
    """Both entry points, REMAP_SIGTERM unset: SIGTERM waits the soft-shutdown timeout (1 s here) for
    the gated step, then cancels it; the attempt releases its lease (``run_retrying`` reason
    ``shutdown``), the worker exits, and another worker resumes the run from its checkpoint. Plain
    celery re-executes itself once to get there, keeping its pid."""
    worker = fleet.start(entry=entry, remap=False)
    reexecuted = REEXEC_LINE in worker.log()
    assert reexecuted == (entry == "celery"), "only plain celery imports billiard before the app"
    assert reaper_pid(worker.log()) == worker.pid, "the worker kept its pid"
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), 30, "s2 to start")
    worker.signal(signal.SIGTERM)
    worker.wait_exit(30)  # a warm shutdown would wait for the gate (90 s)
    assert "Initiating Soft Shutdown" in worker.log()
    assert "Hitting Ctrl+C" not in worker.log()
    assert client.get(run_id).status is Status.RETRYING
    retrying = [e.fields.get("reason") for e in client.history(run_id) if e.type == "run_retrying"]
    assert retrying == ["shutdown"]
    open_gate(redis_client, run_id, attempt=2)
    fleet.start()
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", ENTRIES)
def test_an_idle_worker_exits_promptly_on_sigterm(fleet: Fleet, entry: str) -> None:
    """With nothing running there is nothing to wait for: the worker exits well before a 30 s
    soft-shutdown timeout would have passed, and without Celery's "Hitting Ctrl+C again" hint, which
    it printed for the SIGTERM remapped to the soft shutdown (issue 25)."""
    worker = fleet.start(entry=entry, remap=False, REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S="30")
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.wait_exit(15)
    print(f"\n{entry}: idle worker exited {time.monotonic() - started:.2f}s after SIGTERM (status {code})")
    assert "Initiating Soft Shutdown" not in worker.log()
    assert "Hitting Ctrl+C" not in worker.log()


LEAVE_WITHIN_S = 1.0
"""Issue 34: a stopped worker is gone from the registry within a second of its exit."""


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("sig", "start", "mid_step"),
    [
        (signal.SIGTERM, {}, False),
        (signal.SIGTERM, {"REMAP_SIGTERM": "SIGTERM"}, False),
        (signal.SIGTERM, {"entry": "reflexr-graph", "remap": False}, False),
        (signal.SIGTERM, {}, True),
        (signal.SIGQUIT, {}, False),
        (signal.SIGINT, {}, False),
    ],
    ids=[
        "sigterm-remapped",
        "sigterm-warm",
        "sigterm-reflexr-graph",
        "soft-shutdown-timeout",
        "sigquit",
        "sigint",
    ],
)
def test_a_stopped_worker_leaves_the_registry_at_once(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    sig: signal.Signals,
    start: dict[str, Any],
    mid_step: bool,
) -> None:
    """Every way a worker stops takes it out of the registry (``workers``, and the graphs it served)
    before it exits: the cold shutdown (SIGTERM remapped, SIGQUIT), the warm one (SIGTERM asked to stay
    warm, SIGINT), and the end of the soft-shutdown timeout with a step still running. Only a SIGKILL
    waits out the heartbeat's TTL (30 s)."""
    worker = fleet.start(**start)
    client = client_for(fleet)

    def listed() -> list[str]:
        return [w.name for w in client.workers() if w.name.startswith(f"{worker.name}@")]

    wait_for(listed, 10, f"{worker.name} in the registry")
    if mid_step:
        run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
        wait_for(lambda: "s2:1" in executions(redis_client, run_id), 30, "s2 to start")
    worker.signal(sig)
    worker.wait_exit(30)
    if mid_step:
        assert "Initiating Soft Shutdown" in worker.log()
    wait_for(lambda: not listed(), LEAVE_WITHIN_S, f"{worker.name} gone from the registry")
    assert client.store.serving(["steps"]) == {"steps": []}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_worker_ended_by_its_stop_deadline_leaves_the_registry_first(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    """A worker whose teardown hangs (its pool child frozen mid-step never exits) ends itself at its
    stop deadline (soft-shutdown timeout plus the margin, 11 s here), and leaves the registry before."""
    worker = fleet.start()
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), 30, "s2 to start")
    child = worker.child()
    os.kill(child, signal.SIGSTOP)
    try:
        worker.signal(signal.SIGTERM)
        worker.wait_exit(60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGCONT)
    assert "did not stop within 11s of SIGTERM" in worker.log()
    wait_for(
        lambda: not [w for w in client.workers() if w.name.startswith(f"{worker.name}@")],
        LEAVE_WITHIN_S,
        f"{worker.name} gone from the registry",
    )
