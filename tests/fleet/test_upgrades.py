"""Upgrades that resume (G9): ``upgrade --resume-compatible`` and ``--include-running``, with real
workers of three versions of one graph (tests/fleet/version_graphs.py).

A run held for its version resumes on the newest version from its checkpoint when that graph reads
it (core/compat.py), so what had finished on the old version does not run again; one whose
checkpoint the new graph does not read starts over, and the command says which before ``--yes``.
A running run marked by ``--include-running`` keeps its attempt and moves once it ends.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import AsyncClient, Client
from reflexr_graph.model import Status
from tests import otel
from tests.fleet import version_graphs
from tests.fleet.conftest import Fleet, executions, open_gate
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GRAPH = version_graphs.NAME
V1, V2, V4 = (version_graphs.v1.version, version_graphs.v2.version, version_graphs.v4.version)
REFS = {v: f"tests.fleet.version_graphs:{n}" for v, n in ((V1, "v1"), (V2, "v2"), (V4, "v4"))}
GRACE = {"REFLEXR_VERSION_GRACE_S": "1"}
UPGRADED = "reflexr.runs.upgraded"


def _ran(r: redis.Redis, run_id: str) -> list[str]:
    """The nodes the run executed (``s1@v1``...), in order, attempts left out."""
    return [e.rsplit(":", 1)[0] for e in executions(r, run_id)]


def _calls(r: redis.Redis, run_id: str) -> list[str]:
    """The durable calls of the run's s2 that were made, not read from their record."""
    return [c.decode() for c in r.lrange(version_graphs.calls_key(run_id), 0, -1)]


def _entered(r: redis.Redis, run_id: str, node: str) -> Callable[[], bool]:
    return lambda: node in _ran(r, run_id)


def _held(client: Client, run_id: str, version: str) -> None:
    wait_for(lambda: client.get(run_id).waiting_for == f"version:{version}", 60, f"run {run_id} held")


def _newest(client: Client) -> str | None:
    return next((v.version for v in client.versions(GRAPH) if v.workers), None)


async def _async_plan(fleet: Fleet) -> tuple[list[str], list[str]]:
    """What the async client plans for the runs held for v1, judged by v2's GraphAction given."""
    async with AsyncClient(fleet.settings()) as client:
        plan = await client.upgrade_plan(GRAPH, V1, resume_compatible=True, code=version_graphs.v2)
    return sorted(plan.resumed), plan.restarted


def _cli(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, code: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``reflexr-graph upgrade GRAPH ARGS...`` with REFLEXR_GRAPHS naming version ``code``."""
    env = {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue, "REFLEXR_GRAPHS": REFS[code]}
    return run_cli(["upgrade", GRAPH, *args], env, monkeypatch, stdin=stdin)


def test_held_runs_resume_on_a_compatible_version_and_start_over_on_an_incompatible_one(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two runs at s2 on v1 and one at s2 on v2; the v1 worker is killed and both v1 runs are held.
    `upgrade --from v1 --resume-compatible` says first that both would resume (and changes nothing
    when declined); with --yes they resume on v2 at s2: s1, finished on v1, does not run again.
    Then the v2 worker is killed with its run held, v3 (whose state type v2's state does not
    validate as) is up: the command says the run would start over and why, and it starts over."""
    r = redis_client
    old = fleet.start(concurrency=2, REFLEXR_GRAPHS=REFS[V1], **GRACE)
    client = client_for(fleet)
    runs = [client.enqueue(GRAPH, {"value": n, "gate": "s2@v1"}) for n in range(2)]
    for run_id in runs:
        wait_for(_entered(r, run_id, "s2@v1"), 30, f"run {run_id} at s2 on v1")
    second = fleet.start(concurrency=2, REFLEXR_GRAPHS=REFS[V2], **GRACE)  # one slot stays free
    later = client.enqueue(GRAPH, {"value": 7, "gate": "s2@v2"})
    wait_for(_entered(r, later, "s2@v2"), 30, "the new run at s2 on v2")
    old.kill_group()
    for run_id in runs:
        _held(client, run_id, V1)

    assert asyncio.run(_async_plan(fleet)) == (sorted(runs), [])
    declined = _cli(fleet, monkeypatch, V2, "--from", V1, "--resume-compatible", stdin="n\n")
    assert declined.returncode == 1
    assert f"2 run(s) held for version {V1} would move to {V2}: 2 would resume, 0 would start over" in (
        declined.stderr
    )
    assert "2 would resume: compatible: resumes at 's2'" in declined.stderr
    assert all(client.get(run_id).waiting_for == f"version:{V1}" for run_id in runs), "nothing changed"

    before = otel.metric_total(UPGRADED, reflexr__outcome="resumed")
    done = _cli(fleet, monkeypatch, V2, "--from", V1, "--resume-compatible", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert (sorted(reply["run_ids"]), reply["resumed"], reply["restarted"]) == (sorted(runs), 2, 0)
    assert otel.metric_total(UPGRADED, reflexr__outcome="resumed") - before == 2
    for run_id in runs:
        info = client.wait(run_id, timeout=60)
        assert (info.status, info.version) == (Status.SUCCEEDED, V2)
        # s1 finished on v1 (its checkpoint holds it); s2 was cut short there, and runs on v2.
        assert _ran(r, run_id) == ["s1@v1", "s2@v1", "s2@v2", "s2b@v2", "s3@v2"], "resumed at s2"
        assert info.output == {"ran_on": "v2", "steps": ["s1@v1", "s2@v2", "s2b@v2", "s3@v2"]}
        assert _calls(r, run_id) == ["s2@v1"], "s2's durable call, made on v1, was found on v2"

    fleet.start(REFLEXR_GRAPHS=REFS[V4], **GRACE)
    wait_for(lambda: _newest(client) == V4, 30, "a live worker of v4, the newest")
    second.kill_group()
    _held(client, later, V2)
    declined = _cli(fleet, monkeypatch, V4, "--from", V2, "--resume-compatible", stdin="n\n")
    assert f"1 run(s) held for version {V2} would move to {V4}: 0 would resume, 1 would start over" in (
        declined.stderr
    )
    assert "1 would start over: its next node 's2' no longer exists" in declined.stderr
    before = otel.metric_total(UPGRADED, reflexr__outcome="restarted")
    done = _cli(fleet, monkeypatch, V4, "--from", V2, "--resume-compatible", "--yes")
    assert done.returncode == 0, done.stderr
    assert "0 resumed from their checkpoint, 1 started over from their first step" in done.stdout
    assert otel.metric_total(UPGRADED, reflexr__outcome="restarted") - before == 1
    info = client.wait(later, timeout=60)
    assert (info.status, info.version) == (Status.SUCCEEDED, V4)
    assert _ran(r, later) == ["s1@v2", "s2@v2", "s1@v4", "s2x@v4", "s2b@v4", "s3@v4"], "started over"
    assert _calls(r, later) == ["s2@v2", "s2x@v4"]


def test_include_running_moves_a_live_run_once_its_attempt_ends_not_mid_step(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two runs in a slow s2 on v1, v2 up: `upgrade --include-running --resume-compatible` says they
    move once their attempt ends, and cuts neither. The one whose attempt finishes it finishes on v1;
    the other's attempt ends when its worker stops: no attempt of it starts on v1 again (another v1
    worker is live), and it resumes on v2 at s2."""
    r = redis_client
    old = fleet.start(concurrency=2, REFLEXR_GRAPHS=REFS[V1], **GRACE)
    client = client_for(fleet)
    finishing, stopped = (client.enqueue(GRAPH, {"value": n, "gate": "s2@v1"}) for n in range(2))
    for run_id in (finishing, stopped):
        wait_for(_entered(r, run_id, "s2@v1"), 30, f"run {run_id} at s2 on v1")
    fleet.start(REFLEXR_GRAPHS=REFS[V2], **GRACE)
    wait_for(lambda: _newest(client) == V2, 30, "a live worker of v2, the newest")

    args = ("--from", V1, "--include-running", "--resume-compatible")
    declined = _cli(fleet, monkeypatch, V2, *args, stdin="n\n")
    assert f"2 running run(s) would move once their attempt ends, each judged then by a worker of {V2}" in (
        declined.stderr
    )
    done = _cli(fleet, monkeypatch, V2, *args, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["running"]) == sorted([finishing, stopped])
    for run_id in (finishing, stopped):
        assert client.get(run_id).status is Status.RUNNING, "not cut mid-step"

    open_gate(r, finishing)
    info = client.wait(finishing, timeout=60)
    assert (info.status, info.output["ran_on"]) == (Status.SUCCEEDED, "v1")  # type: ignore[index]
    assert _ran(r, finishing) == ["s1@v1", "s2@v1", "s3@v1"], "its attempt went on, on v1"

    fleet.start(REFLEXR_GRAPHS=REFS[V1], **GRACE)  # a live v1 worker, which must not take it
    old.signal(signal.SIGTERM)  # the attempt ends: the soft shutdown (1 s) cuts it short
    old.wait_exit()
    info = client.wait(stopped, timeout=60)
    assert (info.status, info.version) == (Status.SUCCEEDED, V2)
    assert _ran(r, stopped) == ["s1@v1", "s2@v1", "s2@v2", "s2b@v2", "s3@v2"], "resumed on v2 at s2"
    assert _calls(r, stopped) == ["s2@v1"], "with the record of its durable call"
