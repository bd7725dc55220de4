"""``check-checkpoints`` before a deploy: the stored checkpoints of live runs, read from the fleet's
Redis or from the file ``export`` wrote, judged against the graph as the code to deploy defines it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from tests.fleet import version_graphs
from tests.fleet.conftest import Fleet, executions, open_gate
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

V1_REF = "tests.fleet.version_graphs:v1"
COMPATIBLE = "tests.fleet.version_graphs:v2"
"""One more step after s2: a checkpoint before s2 resumes."""
INCOMPATIBLE = "tests.fleet.version_graphs:v3"
"""A state type v1's states do not validate as: a checkpoint of v1 starts over."""


def test_check_checkpoints_against_the_store_and_against_a_dump(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run held at s2 on v1 has a checkpoint before s2: v2 would resume it (exit 0), v3 would start
    it over (exit 1, saying why); the same verdicts from the file `export` wrote, with no Redis."""
    fleet.start(REFLEXR_GRAPHS=V1_REF)
    client = client_for(fleet)
    run_id = client.enqueue(version_graphs.NAME, {"value": 1, "gate": "s2@v1"})
    wait_for(lambda: "s2@v1:1" in executions(redis_client, run_id), 30, "the run at s2 on v1")
    env = {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue}

    def cli(*args: str, **extra: str) -> tuple[int, dict[str, object]]:
        done = run_cli(list(args), {**env, **extra}, monkeypatch)
        return done.returncode, json.loads(done.stdout or "null")

    code, report = cli("check-checkpoints", COMPATIBLE, "--json")
    assert code == 0, report
    (row,) = report["runs"]  # type: ignore[index]
    assert (row["run_id"], row["resumes"], row["version"]) == (run_id, True, version_graphs.v1.version)
    assert row["reason"] == "compatible: resumes at 's2'"
    code, report = cli("check-checkpoints", INCOMPATIBLE, "--json")
    assert code == 1 and report["start_over"] == 1, report  # type: ignore[index]
    assert "no longer validates" in report["runs"][0]["reason"]  # type: ignore[index]

    dump = tmp_path / "checkpoints.json"
    assert run_cli(["export", version_graphs.NAME, "--output", str(dump)], env, monkeypatch).returncode == 0
    open_gate(redis_client, run_id)
    assert client.wait(run_id, timeout=60).output["ran_on"] == "v1"  # type: ignore[index]
    nowhere = {"REFLEXR_REDIS_URL": "redis://127.0.0.1:1/0"}  # no Redis: the dump is all it reads
    assert cli("check-checkpoints", COMPATIBLE, "--dump", str(dump), "--json", **nowhere)[0] == 0
    code, report = cli("check-checkpoints", INCOMPATIBLE, "--dump", str(dump), "--json", **nowhere)
    assert code == 1 and [r["run_id"] for r in report["runs"]] == [run_id]  # type: ignore[index]
    # Issue 34: the table kept cutting run ids at 80 columns; they are there to be copied.
    table = run_cli(
        ["check-checkpoints", INCOMPATIBLE, "--dump", str(dump)], {**nowhere, "COLUMNS": "80"}, monkeypatch
    )
    assert run_id in table.stdout and str(version_graphs.v1.version) in table.stdout, table.stdout


def test_versions_lists_each_version_with_its_workers_and_runs(
    fleet: Fleet, client_for: Callable[[Fleet], Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet.start(REFLEXR_GRAPHS=V1_REF)
    fleet.start(REFLEXR_GRAPHS=COMPATIBLE)
    client = client_for(fleet)
    run_id = client.enqueue(version_graphs.NAME, {"value": 1})
    assert client.wait(run_id, timeout=60).output["ran_on"] == "v2"  # type: ignore[index]
    env = {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue}
    done = run_cli(["versions", version_graphs.NAME, "--json"], env, monkeypatch)
    assert done.returncode == 0, done.stderr
    (listed,) = json.loads(done.stdout)
    newest, oldest = listed["versions"]
    assert (newest["version"], oldest["version"]) == (version_graphs.v2.version, version_graphs.v1.version)
    assert newest["runs"] == {"succeeded": 1} and oldest["runs"] == {}
    assert len(newest["workers"]) == 1 and len(oldest["workers"]) == 1
    assert "s2b" in newest["nodes"] and "s2b" not in oldest["nodes"]
