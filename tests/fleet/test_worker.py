"""Starting the worker: ``reflexr_graph.worker`` is the app users run, and the repository's ``workers``
serves it to ``celery -A workers`` from the repository root; ``reflexr-graph worker`` (``run_worker``) and
``celery -A workers worker`` exit with the same status; a worker says which graphs and queues it serves
at Celery's default log level. Stopping it: tests/fleet/test_stopping.py. In a user's own project:
tests/fleet/test_user_project.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import graph_queue, version_queue
from reflexr_graph.errors import UnknownGraph
from reflexr_graph.graph_registry import describe
from reflexr_graph.model import Status
from tests import subprocesses
from tests.fleet import graphs
from tests.fleet.conftest import ENTRY_POINTS, READY_LINE, ROOT, Fleet
from tests.waiting import wait_for
from workers.examples import TRIAGE


def _registry_of_workers_app(graphs: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import workers; print(sorted(workers.app.reflexr_registry))"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": subprocesses.PYTHONPATH, "REFLEXR_GRAPHS": graphs},
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
        [sys.executable, "-c", "import reflexr_graph.worker"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": subprocesses.PYTHONPATH},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        "graph reference 'tests.fleet.graphs:nope'" in out.stderr and "has no attribute 'nope'" in out.stderr
    )


def run_to_exit(entry: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENTRY_POINTS[entry], *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--pidfile=/nonexistent/dir/worker.pid"], {}, "LockFailed"),
        (["-P", "no-such-pool"], {}, "no-such-pool"),
        ([], {"REFLEXR_GRAPHS": "tests.fleet.graphs:nope"}, "has no attribute 'nope'"),
    ],
    ids=["unrecoverable-error-at-start", "bad-usage", "bad-graph-reference"],
)
def test_a_worker_failing_at_start_exits_with_the_same_status_either_way(
    fleet: Fleet, args: list[str], env: dict[str, str], says: str
) -> None:
    """A supervisor that restarts only on failure must see it: ``reflexr-graph worker`` exits with the
    status ``celery -A workers worker`` exits with, and it is not 0."""
    worker_env = fleet.worker_env(env)
    done = {entry: run_to_exit(entry, ["-Q", fleet.queue, *args], worker_env) for entry in ENTRY_POINTS}
    codes = {entry: result.returncode for entry, result in done.items()}
    print(f"\nexit statuses: {codes}")
    assert codes["reflexr-graph"] == codes["celery"] != 0
    for result in done.values():
        assert says in result.stdout + result.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_worker_stopped_by_sigint_exits_1_either_way(fleet: Fleet, entry: str) -> None:
    """Celery's Ctrl+C (a warm shutdown) exits 1; the wrapper used to exit 0 there."""
    worker = fleet.start(entry=entry)
    worker.signal(signal.SIGINT)
    assert worker.wait_exit(30) == 1


@pytest.mark.timeout(120)
def test_a_worker_without_l_says_at_start_which_graphs_and_queues_it_serves(
    fleet: Fleet, client_for: Callable[[Fleet], Client]
) -> None:
    """Celery's default level is WARNING; the fleet's INFO lines show anyway, the start line first."""
    worker = fleet.start(loglevel=None)
    line = next(line for line in worker.log().splitlines() if READY_LINE in line)
    assert "INFO" in line
    assert f"serves graphs {describe({a.name: a for a in graphs.ALL})};" in line
    per_graph = [graph_queue(fleet.queue, a.name) for a in graphs.ALL]
    per_version = [version_queue(fleet.queue, a.name, a.version) for a in graphs.ALL]
    queues = sorted([fleet.queue, *per_graph, *per_version])
    assert line.endswith(f"consumes queues {', '.join(queues)}"), "the base queue, one per graph and version"
    assert "reaper" in worker.log() and " ready." not in worker.log(), "reflexr_graph INFO, not Celery's"
    client = client_for(fleet)
    run_id = client.enqueue("steps", {"value": 1})
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    wait_for(lambda: f"run {run_id} succeeded" in worker.log(), 10, "the pool child's INFO line")


@pytest.mark.timeout(120)
def test_an_explicit_log_level_is_respected(fleet: Fleet, client_for: Callable[[Fleet], Client]) -> None:
    worker = fleet.start(loglevel="warning", wait=False)
    client = client_for(fleet)
    run_id = wait_for(lambda: _enqueue_when_published(client), 45, "the worker to publish its graphs")
    assert client.wait(run_id, timeout=60).status is Status.SUCCEEDED
    assert worker.alive()
    assert "INFO" not in worker.log()


def _enqueue_when_published(client: Client) -> str | None:
    try:
        return client.enqueue("steps", {"value": 1})
    except UnknownGraph:
        return None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_worker_on_a_redis_url_that_cannot_work_stops_saying_why(fleet: Fleet, entry: str) -> None:
    """A URL no retry can fix (here a database the server does not have) stops the worker at start with
    exit status 1 and one line saying what to fix, where Celery would retry it forever."""
    fleet.redis_url = fleet.redis_url.rsplit("/", 1)[0] + "/99"
    worker = fleet.start(entry=entry, wait=False)
    assert worker.wait_exit(60) == 1
    assert "has no database 99" in worker.log() and "the worker stops" in worker.log()
