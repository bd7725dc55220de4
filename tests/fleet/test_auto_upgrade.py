"""Auto-upgrades (issue 34 item 6): with ``GraphAction(on_new_version="auto_upgrade")`` a run whose
version lost its last live worker moves by itself to the newest served version, with real workers
of two versions of four graphs (tests/fleet/auto_graphs.py): one that resumes, one whose checkpoint
the new graph cannot read and holds, one that restarts instead, and one pinned (the default).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.model import Status
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet import auto_graphs as ag
from tests.fleet.conftest import Fleet, events, executions
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GRACE = {"REFLEXR_VERSION_GRACE_S": "1"}
APPROVED = {"approved": True, "by": "ana"}


def _ran(r: redis.Redis, run_id: str) -> list[str]:
    return [e.rsplit(":", 1)[0] for e in executions(r, run_id)]


def _waiting_on(client: Client, run_id: str, version: str, waits_for: str = "approval") -> bool:
    info = client.get(run_id)
    return (info.status, info.version, info.waiting_for) == (Status.WAITING, version, waits_for)


def _upgraded(store: RedisStore, run_id: str) -> list[dict[str, str]]:
    return [e.fields for e in events(store, run_id, "run_upgraded")]


def test_waiting_runs_move_by_themselves_when_their_version_goes_and_pinned_ones_stay(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One run of each graph waits for its approval on the old version; that version's only worker
    stops, and a worker of the new versions starts. With no operator command: the auto_upgrade run
    moves to the new version while it waits and, once approved, finishes there with nothing that
    had finished run again; the incompatible one stays (held, saying why, once its approval queues
    it); the on_incompatible="restart" one starts over on the new version; the pinned one stays."""
    r, store = redis_client, RedisStore.from_url(fleet.redis_url)
    old = fleet.start(REFLEXR_GRAPHS=ag.OLD, **GRACE)
    client = client_for(fleet)
    graphs = (ag.AUTO, ag.HOLD, ag.RESTART, ag.PINNED)
    runs = {g: client.enqueue(g, {"ticket": g}) for g in graphs}
    for g, v in zip(graphs, ("a1", "h1", "r1", "p1"), strict=True):
        wait_for(lambda g=g, v=v: _waiting_on(client, runs[g], v), 30, f"the {g} run waiting on {v}")
    old.signal(signal.SIGTERM)
    old.wait_exit()
    fleet.start(REFLEXR_GRAPHS=ag.NEW, **GRACE)

    # restartflow is the last graph the worker's pass looks at: once it moved, the pass was made.
    wait_for(lambda: _waiting_on(client, runs[ag.RESTART], "r2"), 60, "the restartflow run on r2")
    assert _ran(r, runs[ag.RESTART]) == ["prepare@r1", "review@r1", "prepare@r2", "review2@r2"]
    assert _upgraded(store, runs[ag.RESTART]) == [
        {"from_version": "r1", "version": "r2", "how": "restarted", "by": "auto_upgrade"}
    ]
    assert _waiting_on(client, runs[ag.AUTO], "a2"), "moved while it waits, on its checkpoint"
    assert _upgraded(store, runs[ag.AUTO]) == [
        {"from_version": "a1", "version": "a2", "how": "resumed", "by": "auto_upgrade"}
    ]
    assert _waiting_on(client, runs[ag.PINNED], "p1"), "a pinned run does not move"
    assert _upgraded(store, runs[ag.PINNED]) == []
    assert _waiting_on(client, runs[ag.HOLD], "h1"), "h2 cannot read its checkpoint: it stays"
    why = "version h2 cannot resume it: its next node 'review' no longer exists"
    held = [e.fields for e in events(store, runs[ag.HOLD], "upgrade_held")]
    assert held == [{"from_version": "h1", "version": "h2", "reason": why}]

    assert client.signal(runs[ag.AUTO], "approval", APPROVED)
    info = client.wait(runs[ag.AUTO], timeout=60)
    assert (info.status, info.version) == (Status.SUCCEEDED, "a2")
    assert info.output == {"ran_on": "a2", "steps": ["prepare@a1", "review@a2", "close@a2", "publish@a2"]}
    assert _ran(r, runs[ag.AUTO]).count("prepare@a1") == 1 and "prepare@a2" not in _ran(r, runs[ag.AUTO])

    # Approved, the held run needs a worker of h1 again: it waits for one, and says why it waits.
    client.signal(runs[ag.HOLD], "approval", APPROVED)
    wait_for(lambda: _waiting_on(client, runs[ag.HOLD], "h1", f"version:h1 ({why})"), 60, "held, with why")
    assert len(events(store, runs[ag.HOLD], "upgrade_held")) == 1, "said once"

    listed = run_cli(["versions", ag.AUTO, "--json"], {"REFLEXR_REDIS_URL": fleet.redis_url}, monkeypatch)
    behaviours = {v["version"]: v["on_new_version"] for v in json.loads(listed.stdout)[0]["versions"]}
    assert behaviours == {"a1": "auto_upgrade", "a2": "auto_upgrade"}
    table = run_cli(
        ["versions", ag.PINNED], {"REFLEXR_REDIS_URL": fleet.redis_url, "COLUMNS": "250"}, monkeypatch
    )
    assert "on new version" in table.stdout and "pinned" in table.stdout
