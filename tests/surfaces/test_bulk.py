"""Bulk operations by filter of status, graph and tags: cancel and dlq replay, on the Client, the
CLI and the API, touching only the runs that match, a page at a time, resumable."""

from __future__ import annotations

import json
import subprocess

import pytest
import redis

from reflexr_graph.cli import bulk as cli_bulk
from reflexr_graph.client import Client
from reflexr_graph.client import bulk as client_bulk
from reflexr_graph.errors import InvalidInputs
from reflexr_graph.model import Status
from tests.surfaces.conftest import ApiServer, Cli
from tests.surfaces.graphs import release_key
from tests.waiting import wait_for

JOB = {"key": "a", "n": 1}


def _tagged(client: Client, tenant: str, n: int, graph: str = "counter") -> list[str]:
    return [client.enqueue(graph, JOB, tags={"tenant": tenant}) for _ in range(n)]


def _statuses(client: Client, run_ids: list[str]) -> set[Status]:
    return {client.get(r).status for r in run_ids}


def test_a_bulk_cancel_by_tag_touches_only_the_runs_that_match(client: Client) -> None:
    acme, globex = _tagged(client, "acme", 3), _tagged(client, "globex", 2)
    plain = client.enqueue("counter", JOB)
    assert {r.run_id for r in client.cancellable(tags={"tenant": "acme"})} == set(acme)
    done = client.cancel_many(tags={"tenant": "acme"})
    assert sorted(done.cancelled) == sorted(acme) and done.refused == []
    assert _statuses(client, acme) == {Status.CANCELLED}
    assert _statuses(client, [*globex, plain]) == {Status.QUEUED}
    assert client.cancel_many(tags={"tenant": "acme"}).cancelled == []


def test_a_bulk_cancel_by_status_and_graph_reads_only_their_runs(client: Client) -> None:
    counters = [client.enqueue("counter", JOB) for _ in range(2)]
    chain = client.enqueue("blocker", "c")
    done = client.cancel_many(status="queued", graph="counter")
    assert sorted(done.cancelled) == sorted(counters)
    assert client.get(chain).status is Status.QUEUED


def test_a_bulk_cancel_refuses_ids_with_a_filter_and_a_status_it_cannot_take(client: Client) -> None:
    run_id = client.enqueue("counter", JOB)
    with pytest.raises(InvalidInputs):
        client.cancel_many([run_id], graph="counter")
    with pytest.raises(InvalidInputs):
        client.cancel_many(status="succeeded")
    assert client.get(run_id).status is Status.QUEUED


def test_a_bulk_cancel_goes_a_page_at_a_time_and_resumes_with_what_is_left(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_bulk, "BULK_LIMIT", 2)
    acme = _tagged(client, "acme", 5)
    pages = [len(client.cancel_many(tags={"tenant": "acme"}).cancelled) for _ in range(4)]
    assert pages == [2, 2, 1, 0]
    assert _statuses(client, acme) == {Status.CANCELLED}


def test_cancel_all_shows_the_count_and_asks_first(client: Client, cli: Cli) -> None:
    acme, globex = _tagged(client, "acme", 3), _tagged(client, "globex", 1)
    declined = cli("cancel", "--all", "--tag", "tenant=acme", stdin="n\n")
    assert declined.returncode == 1
    assert "cancel 3 run(s) (tag tenant=acme)?" in declined.stdout
    assert _statuses(client, acme) == {Status.QUEUED}
    done = cli("cancel", "--all", "--tag", "tenant=acme", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cancelled: 3 of 3 run(s)" in done.stdout
    assert _statuses(client, acme) == {Status.CANCELLED}
    assert _statuses(client, globex) == {Status.QUEUED}
    none_left = cli("cancel", "--all", "--tag", "tenant=acme", "--yes")
    assert none_left.returncode == 2 and "matched no cancellable runs" in none_left.stderr


def test_cancel_all_goes_on_page_after_page(
    client: Client, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_bulk, "BULK_LIMIT", 2)
    acme = _tagged(client, "acme", 5)
    done = cli("cancel", "--all", "--status", "queued", "--tag", "tenant=acme", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cancelled: 5 of 5 run(s)" in done.stdout
    assert _statuses(client, acme) == {Status.CANCELLED}


def test_cancel_usage_errors(client: Client, cli: Cli) -> None:
    run_id = client.enqueue("counter", JOB)
    for args in (("cancel",), ("cancel", run_id, "--all"), ("cancel", run_id, "--graph", "counter")):
        result = cli(*args, "--yes")
        assert result.returncode == 2, (args, result.stdout, result.stderr)
    assert client.get(run_id).status is Status.QUEUED


def _dead(client: Client, tenant: str, n: int) -> list[str]:
    """Counter runs that die at s2 (its flag is not set; max_attempts=1)."""
    runs = [
        client.enqueue("counter", {"key": f"{tenant}{i}", "n": 1}, tags={"tenant": tenant}) for i in range(n)
    ]
    wait_for(lambda: _statuses(client, runs) == {Status.DEAD}, timeout=60, what="the runs to die")
    return runs


def test_dlq_replay_all_by_tag_replays_only_the_runs_that_match(
    client: Client, cli: Cli, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    acme, globex = _dead(client, "acme", 2), _dead(client, "globex", 1)
    assert {r.run_id for r in client.dead_letters(tags={"tenant": "acme"})} == set(acme)
    listed = cli("dlq", "list", "--tag", "tenant=acme", "--json")
    assert {r["run_id"] for r in json.loads(listed.stdout)} == set(acme)
    declined = cli("dlq", "replay", "--all", "--tag", "tenant=acme", stdin="n\n")
    assert "replay 2 dead run(s)?" in declined.stdout and declined.returncode == 1
    done = cli("dlq", "replay", "--all", "--tag", "tenant=acme", "--yes")
    assert done.returncode == 0, done.stderr
    assert [client.get(r).replays for r in acme] == [1, 1]
    assert client.get(globex[0]).replays == 0 and client.get(globex[0]).status is Status.DEAD


def test_the_api_cancels_and_replays_by_filter(client: Client, api_server: ApiServer) -> None:
    acme, globex = _tagged(client, "acme", 2), _tagged(client, "globex", 1)
    with api_server.http() as http:
        done = http.post("/api/runs/cancel", json={"tags": {"tenant": "acme"}})
        assert done.status_code == 200, done.text
        assert sorted(done.json()["cancelled"]) == sorted(acme) and done.json()["refused"] == []
        again = http.post("/api/runs/cancel", json={"run_ids": acme})
        assert {r["status"] for r in again.json()["refused"]} == {409}
        assert http.post("/api/runs/cancel", json={"status": "dead"}).status_code == 422
        replayed = http.post("/api/dead-letters/replay", json={"tags": {"tenant": "acme"}})
        assert replayed.json() == {"replayed": [], "refused": []}  # cancelled is not dead
    assert _statuses(client, globex) == {Status.QUEUED}


def test_cancel_all_of_running_runs_asks_each_once_and_ends(
    client: Client, cli: Cli, worker: subprocess.Popen[bytes], redis_client: redis.Redis
) -> None:
    run_id = client.enqueue("blocker", "b1", tags={"tenant": "acme"})
    wait_for(lambda: client.get(run_id).status is Status.RUNNING, timeout=60, what="the run to start")
    done = cli("cancel", "--all", "--status", "running", "--yes")
    assert done.returncode == 0, done.stderr
    assert "cancelled: 1 of 1 run(s)" in done.stdout
    assert client.get(run_id).cancel_requested
    assert client.cancellable(status="running") == []
    redis_client.rpush(release_key("b1"), "go")
    wait_for(lambda: client.get(run_id).status is Status.CANCELLED, timeout=60, what="the run to stop")


def test_a_bulk_purge_by_tag_deletes_only_the_finished_runs_that_match(client: Client) -> None:
    acme, globex = _tagged(client, "acme", 3), _tagged(client, "globex", 1)
    client.cancel_many([*acme[:2], *globex])
    assert client.purgeable(tags={"tenant": "acme"}) and {
        r.run_id for r in client.purgeable(tags={"tenant": "acme"})
    } == set(acme[:2])
    done = client.purge_many(tags={"tenant": "acme"})
    assert sorted(done.purged) == sorted(acme[:2]) and done.refused == []
    assert {r.run_id for r in client.runs(tags={"tenant": "acme"})} == {acme[2]}, "the queued one stays"
    assert _statuses(client, globex) == {Status.CANCELLED}, "another tenant's stays"
    refused = client.purge_many([acme[2], acme[0]])
    assert [r.run_id for r in refused.refused] == [acme[2], acme[0]], "not finished; gone"
    with pytest.raises(InvalidInputs, match="succeeded"):
        client.purge_many(status="queued")
    with pytest.raises(InvalidInputs, match="not both"):
        client.purge_many([acme[2]], tags={"tenant": "acme"})


def test_purge_all_shows_the_count_asks_first_and_goes_page_after_page(
    client: Client, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_bulk, "BULK_LIMIT", 2)
    acme = _tagged(client, "acme", 5)
    client.cancel_many(acme)
    declined = cli("purge", "--all", "--tag", "tenant=acme", stdin="n\n")
    assert declined.returncode == 1
    assert "delete at least 2 finished run(s) (tag tenant=acme)" in declined.stdout
    assert _statuses(client, acme) == {Status.CANCELLED}
    done = cli("purge", "--all", "--status", "cancelled", "--tag", "tenant=acme", "--yes")
    assert done.returncode == 0, done.stderr
    assert "purged: 5 of 5 run(s)" in done.stdout
    assert client.runs(tags={"tenant": "acme"}) == []
    for args in (("purge",), ("purge", acme[0], "--all"), ("purge", acme[0], "--graph", "counter")):
        result = cli(*args, "--yes")
        assert result.returncode == 2, (args, result.stdout, result.stderr)
    assert cli("purge", "--all", "--status", "queued", "--yes").returncode == 2


def test_the_api_purges_by_filter(client: Client, api_server: ApiServer) -> None:
    acme, globex = _tagged(client, "acme", 2), _tagged(client, "globex", 1)
    client.cancel_many(acme)
    with api_server.http() as http:
        done = http.post("/api/runs/purge", json={"tags": {"tenant": "acme"}})
        assert done.status_code == 200, done.text
        assert sorted(done.json()["purged"]) == sorted(acme) and done.json()["refused"] == []
        refused = http.post("/api/runs/purge", json={"run_ids": globex}).json()["refused"]
        assert [(r["run_id"], r["status"]) for r in refused] == [(globex[0], 409)]
        assert http.post("/api/runs/purge", json={"status": "running"}).status_code == 422
    assert _statuses(client, globex) == {Status.QUEUED}


def test_an_empty_filter_is_refused_on_every_surface_and_all_means_every_run(
    client: Client, cli: Cli, api_server: ApiServer
) -> None:
    """``cancel``/``purge`` with no ids and no filter would act on every run: the API wants
    ``"all": true``, the Client ``all=True`` and the CLI ``--all``, each named in the refusal."""
    runs = [*_tagged(client, "acme", 2), client.enqueue("blocker", "b")]
    with api_server.http() as http:
        for action in ("cancel", "purge"):
            for body in ({}, {"now": True}, {"tags": {}}, {"graph": ""}):
                refused = http.post(f"/api/runs/{action}", json=body)
                assert refused.status_code == 422 and '"all": true' in refused.json()["detail"], refused.text
            both = http.post(f"/api/runs/{action}", json={"run_ids": runs[:1], "all": True})
            assert both.status_code == 422
    for act in (client.cancel_many, client.purge_many):
        with pytest.raises(InvalidInputs, match=r"all=True"):
            act()
    for args in (("cancel",), ("purge",), ("dlq", "purge")):
        done = cli(*args, "--yes")
        assert done.returncode == 2 and "--all" in done.stderr, (args, done.stderr)
    assert _statuses(client, runs) == {Status.QUEUED}, "nothing was cancelled"

    with api_server.http() as http:
        cancelled = http.post("/api/runs/cancel", json={"all": True}).json()["cancelled"]
        assert sorted(cancelled) == sorted(runs)
        assert sorted(http.post("/api/runs/purge", json={"all": True}).json()["purged"]) == sorted(runs)
    assert client.runs() == []
    again = _tagged(client, "globex", 2)
    assert sorted(client.cancel_many(all=True).cancelled) == sorted(again)
    assert sorted(client.purge_many(all=True).purged) == sorted(again)
    client.enqueue("counter", JOB)
    done = cli("cancel", "--all", "--yes")
    assert done.returncode == 0 and "cancelled: 1 of 1 run(s)" in done.stdout, done.stderr
    assert cli("purge", "--all", "--yes").returncode == 0 and client.runs() == []
