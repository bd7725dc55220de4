"""Starting the worker: ``workers`` is importable as the deployable app, and ``run_worker``
starts the same worker programmatically, with SIGTERM remapped to soft shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.fleet.conftest import ROOT, Fleet, Worker, executions, open_gate
from tests.waiting import wait_for
from workers.examples import TRIAGE

RUN_WORKER = (
    "import sys; from reflexr_graph.fleet.worker import run_worker; sys.exit(run_worker(sys.argv[1:]))"
)


def _registry_of_workers_app(graphs: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import workers; print(sorted(workers.app.reflexr_registry))"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "REFLEXR_GRAPHS": graphs},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_workers_app_loads_only_the_graphs_of_reflexr_graphs() -> None:
    """``celery -A workers`` finds ``workers.app``, which runs the REFLEXR_GRAPHS graphs and nothing
    else: the bundled triage example is not published, so a user's own graph may be named triage."""
    assert _registry_of_workers_app("tests.fleet.graphs:steps,tests.fleet.refs.triage:triage") == (
        "['steps', 'triage']"
    )
    assert _registry_of_workers_app("tests.fleet.graphs:steps") == "['steps']"


def test_workers_app_loads_the_examples_when_asked() -> None:
    """The examples load like any graph, when REFLEXR_GRAPHS names them (as the demo does)."""
    assert _registry_of_workers_app(f"tests.fleet.graphs:steps,{TRIAGE}") == "['steps', 'triage']"


def test_bad_graph_reference_stops_the_worker_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker refuses to start on a reference it cannot resolve, saying which and why."""
    monkeypatch.setenv("REFLEXR_GRAPHS", "tests.fleet.graphs:nope")
    out = subprocess.run(
        [sys.executable, "-c", "import workers"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        "graph reference 'tests.fleet.graphs:nope'" in out.stderr and "has no attribute 'nope'" in out.stderr
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_run_worker_starts_the_worker_with_soft_shutdown(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis, tmp_path: Path
) -> None:
    """run_worker(argv) runs the same worker as ``celery -A workers worker``; without REMAP_SIGTERM in
    its environment it still remaps SIGTERM, so SIGTERM mid-step releases the lease."""
    env = fleet.worker_env({})
    env.pop("REMAP_SIGTERM")
    name = f"rw-{uuid.uuid4().hex[:6]}"
    log_path = tmp_path / f"{name}.log"
    argv = ["-Q", fleet.queue, "-c", "1", "-n", f"{name}@%h", "-l", "info",
            "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUN_WORKER, *argv], cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    worker = Worker(name, proc, log_path)
    fleet.workers.append(worker)
    fleet.wait_ready(worker)
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1, "gate": "s2"})
    wait_for(lambda: "s2:1" in executions(redis_client, run_id), 30, "s2 to start")
    worker.signal(signal.SIGTERM)
    code = worker.wait_exit(30)
    assert "Soft Shutdown" in worker.log()
    assert client.get(run_id).status is Status.RETRYING
    assert [e.fields.get("reason") for e in client.history(run_id) if e.type == "run_retrying"] == [
        "shutdown"
    ]
    print(f"\nrun_worker exit code after SIGTERM: {code}")
    open_gate(redis_client, run_id, attempt=2)
    fleet.start()
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert executions(redis_client, run_id) == ["s1:1", "s2:1", "s2:2", "s3:2"]
