"""A running run that ``upgrade --include-running`` marked, on the surfaces: ``status`` (CLI), the
API's run and the console's run page say it moves to the new version when its attempt ends, and
whether it then resumes or starts over; and ``upgrade`` says what to fix for bad input."""

from __future__ import annotations

import json

import pytest
import redis

from reflexr_graph import clock, errors
from reflexr_graph.client import Client
from reflexr_graph.core.action import GraphAction
from reflexr_graph.model import VersionEntry
from reflexr_graph.store import keys
from reflexr_graph.store.upgrades import mark_of, upgrade_run
from tests.store.support import make_run, start
from tests.surfaces.browser import chromium, find, until
from tests.surfaces.conftest import ApiServer, Cli
from tests.surfaces.graphs import counter
from tests.surfaces.test_child_surfaces import _open_run

pytestmark = pytest.mark.timeout(120)

MOVES = "moves to version v2 when its attempt ends"


def _marked(client: Client, r: redis.Redis, name: str, *, resume: bool) -> str:
    """A run running on v1, marked to move to v2."""
    run_id = make_run(client.store, f"{name}-{id(client)}")
    start(client.store, run_id)
    r.hset(keys.run(run_id), "version", "v1")  # as its first claim on v1 wrote it
    assert client.store.do(upgrade_run(run_id, "demo", ("v1", "v2"), mark=mark_of("v1", resume))) == "marked"
    return run_id


def test_status_says_a_marked_run_moves_when_its_attempt_ends(
    client: Client, redis_client: redis.Redis, cli: Cli
) -> None:
    resumes = _marked(client, redis_client, "resumes", resume=True)
    restarts = _marked(client, redis_client, "restarts", resume=False)
    shown = cli("status", resumes)
    assert shown.returncode == 0, shown.stderr
    assert MOVES in shown.stdout and "resumes from its checkpoint" in shown.stdout
    shown = cli("status", restarts)
    assert MOVES in shown.stdout and "starts over from its first step" in shown.stdout
    found = json.loads(cli("status", resumes, "--json").stdout)
    assert (found["upgrade_to"], found["upgrade_resumes"]) == ("v2", True)
    plain = json.loads(cli("status", make_run(client.store, f"plain-{id(client)}"), "--json").stdout)
    assert (plain["upgrade_to"], plain["upgrade_resumes"]) == (None, None)


def test_the_api_and_the_console_show_a_marked_run(
    client: Client, redis_client: redis.Redis, api_server: ApiServer
) -> None:
    run_id = _marked(client, redis_client, "shown", resume=False)
    with api_server.http() as http:
        found = http.get(f"/api/runs/{run_id}").json()
    assert (found["upgrade_to"], found["upgrade_resumes"]) == ("v2", False)
    with chromium() as browser:
        _open_run(browser, api_server, run_id)
        until(browser, lambda d: find(d, "#run-upgrade"), "the run's page, with its upgrade")
        shown = browser.execute_script("return document.querySelector('#run-upgrade').textContent")
        assert MOVES in shown and "starts over from its first step" in shown


def _versions(client: Client, r: redis.Redis, graph: str) -> None:
    """Versions v1 and v2 of ``graph`` published, v2 served by a live worker (as its beat writes)."""
    now = clock.now_ms() / 1000
    entries = [
        VersionEntry(version=v, fingerprint=v, first_published_at=now + n) for n, v in enumerate(("v1", "v2"))
    ]
    client.store.publish_versions(entries, [graph, graph])
    r.zadd(keys.served_version(graph, "v2"), {"worker-v2": clock.now_ms() + 60_000})
    r.zadd(keys.WORKERS, {"worker-v2": clock.now_ms() + 60_000})  # a served entry counts for a live worker


def test_upgrade_says_what_to_fix_for_an_unknown_graph_or_version(
    client: Client, redis_client: redis.Redis, cli: Cli
) -> None:
    graph = f"upg-{id(client)}"
    _versions(client, redis_client, graph)
    unknown_graph = cli("upgrade", "no-such-graph", "--from", "v1", "--yes")
    assert unknown_graph.returncode == 1
    assert "no worker ever published a version of graph 'no-such-graph'" in unknown_graph.stderr
    assert "reflexr-graph graphs" in unknown_graph.stderr
    unknown_version = cli("upgrade", graph, "--from", "v9", "--yes")
    assert unknown_version.returncode == 1
    assert f"graph {graph!r} has no version 'v9'" in unknown_version.stderr
    assert f"reflexr-graph versions {graph}" in unknown_version.stderr
    with pytest.raises(errors.OperationRefused, match="has no version 'v9'"):
        client.upgrade(graph, "v9")
    assert client.upgrade_plan(graph, "v1").to_version == "v2", "a known version plans as before"


def test_resume_compatible_with_code_not_of_the_newest_served_version_is_refused(
    client: Client, redis_client: redis.Redis
) -> None:
    graph = f"upg-code-{id(client)}"
    _versions(client, redis_client, graph)
    old_code = GraphAction(counter.graph, name=graph, version="v1")
    with pytest.raises(errors.OperationRefused, match="REFLEXR_GRAPHS to the new version's"):
        client.upgrade(graph, "v1", resume_compatible=True, code=old_code)
