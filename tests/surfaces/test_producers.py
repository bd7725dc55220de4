"""What producers meet (issue 14): keys per graph, conflicts, models as inputs, payload limits, a graph
no worker serves, publishing before any worker, and settings older producers do not know."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import graph_queue
from reflexr_graph.config.settings import load_settings
from reflexr_graph.core.port import Boundary, Notes
from reflexr_graph.errors import IdempotencyConflict, InvalidInputs, SettingsError, UnknownGraph, WaitTimeout
from reflexr_graph.model import WorkerInfo
from reflexr_graph.store import keys
from tests.fleet.inproc import queued_messages
from tests.surfaces.conftest import Cli
from tests.surfaces.graphs import ACTIONS, Job

SECRET = "hunter2-private-value"


def test_idempotency_keys_belong_to_one_graph_and_refuse_other_inputs(client: Client) -> None:
    """Item 10: one key on two graphs makes two runs; the same key with other inputs raises
    IdempotencyConflict naming the run the key already names, never the inputs."""
    first = client.enqueue("counter", {"key": "a", "n": 1}, idempotency_key="doc-77")
    assert client.enqueue("counter", {"n": 1, "key": "a"}, idempotency_key="doc-77") == first
    other_graph = client.enqueue("blocker", "a", idempotency_key="doc-77")
    assert other_graph != first
    with pytest.raises(IdempotencyConflict) as conflict:
        client.enqueue("counter", {"key": SECRET, "n": 2}, idempotency_key="doc-77")
    assert conflict.value.run_id == first and first in str(conflict.value)
    assert SECRET not in str(conflict.value)


def test_models_and_dataclasses_are_accepted_as_inputs(client: Client) -> None:
    """The graph's own pydantic model (and a dataclass) are dumped, not refused as "not an object"."""
    run_id = client.enqueue("counter", Job(key="m", n=3))
    assert json.loads(client.store.client.hget(keys.run(run_id), "inputs")) == {"key": "m", "n": 3}

    @dataclass
    class Plain:
        key: str
        n: int

    assert client.enqueue("counter", Plain("d", 4))


def test_inputs_above_the_payload_limit_are_refused_at_enqueue(
    redis_url: str, queue: str, published: None
) -> None:
    """REFLEXR_MAX_PAYLOAD_BYTES: inputs larger than it are refused before anything is queued, saying so."""
    with Client(load_settings(redis_url=redis_url, queue=queue, max_payload_bytes=2048)) as client:
        with pytest.raises(InvalidInputs, match="above REFLEXR_MAX_PAYLOAD_BYTES"):
            client.enqueue("counter", {"key": "x" * 5000, "n": 1})
        assert client.runs() == []


def test_messages_carry_the_graph_not_the_inputs(client: Client, queue: str) -> None:
    """The message is only a nudge: on the graph's own queue, naming the graph; the inputs stay in the
    run record, so a large or private input is not copied into the broker or shown by monitoring."""
    run_id = client.enqueue("counter", {"key": SECRET, "n": 1})
    [message] = queued_messages(client.store, graph_queue(queue, "counter"))
    assert (message["id"], message["kwargs"]) == (run_id, {"graph": "counter"})


def test_enqueue_warns_when_no_live_worker_serves_the_graph(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 9: the schema outlives the workers, so enqueue still accepts the run, but says that no live
    worker serves the graph; with one beating, it says nothing."""
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.client"):
        client.enqueue("counter", {"key": "w", "n": 1})
    assert any("no live worker serves graph 'counter'" in r.getMessage() for r in caplog.records)
    caplog.clear()
    client.store.worker_beat(WorkerInfo(name="w@host", graphs=("blocker",)), ttl_ms=60_000)
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.client"):
        client.enqueue("blocker", "w")
    assert not caplog.records
    assert client.serving(["counter", "blocker"]) == {"counter": [], "blocker": ["w@host"]}
    assert [w.name for w in client.workers()] == ["w@host"]


def test_publish_lets_a_producer_enqueue_before_any_worker_started(
    cli: Cli, redis_client: redis.Redis, redis_url: str, queue: str
) -> None:
    """Item 9, the reverse case: with nothing published, enqueue is refused; `reflexr-graph publish` from a
    deploy step publishes the schema without a worker, and enqueue then validates and accepts."""
    with (
        Client(load_settings(redis_url=redis_url, queue=queue)) as client,
        pytest.raises(UnknownGraph, match="reflexr-graph publish"),
    ):
        client.enqueue("counter", {"key": "p", "n": 1})
    out = cli("publish", "tests.surfaces.graphs:counter")
    assert out.returncode == 0, out.stderr
    assert "counter: published" in out.stdout and "no live worker serves it yet" in out.stdout
    again = cli("publish", "tests.surfaces.graphs:counter", "--json")
    assert json.loads(again.stdout)[0]["written"] is False
    with Client(load_settings(redis_url=redis_url, queue=queue)) as client, pytest.raises(InvalidInputs):
        client.enqueue("counter", {"key": "", "n": 1})
    with Client(load_settings(redis_url=redis_url, queue=queue)) as client:
        assert client.enqueue("counter", {"key": "p", "n": 1})


def test_unknown_graph_names_the_closest_published_one(client: Client) -> None:
    with pytest.raises(UnknownGraph, match="did you mean 'counter'"):
        client.enqueue("countr", {"key": "a", "n": 1})


def test_clients_warn_about_unknown_settings_where_workers_refuse(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A producer older than the workers must not refuse to start over a setting it does not know yet:
    the Client warns; a worker, where a typo would silently run with a default, still refuses."""
    monkeypatch.setenv("REFLEXR_FUTURE_KNOB", "1")
    with caplog.at_level(logging.WARNING, logger="reflexr_graph.config.settings"):
        Client.from_url(redis_url).close()
    assert any("REFLEXR_FUTURE_KNOB" in r.getMessage() for r in caplog.records)
    with pytest.raises(SettingsError, match="REFLEXR_FUTURE_KNOB"):
        load_settings()


def test_published_schemas_are_those_of_the_actions(redis_client: redis.Redis) -> None:
    """The publish step writes the same entry a worker does (so a worker starting later changes nothing)."""
    assert schemas.publish(redis_client, ACTIONS) == [a.name for a in ACTIONS]
    assert schemas.publish(redis_client, ACTIONS) == []


def test_graphs_lists_the_live_workers_of_each_graph(cli: Cli, published: None, redis_url: str) -> None:
    """Item 9: `graphs` says which live workers serve each graph (none, once every worker stopped), in
    the table and in --json."""
    with Client.from_url(redis_url) as client:
        client.store.worker_beat(WorkerInfo(name="w1@host", graphs=("counter",)), ttl_ms=60_000)
    listed = {g["name"]: g["workers"] for g in json.loads(cli("graphs", "--json").stdout)}
    assert listed == {"approvals": [], "blocker": [], "counter": ["w1@host"]}
    table = cli("graphs")
    assert "w1@host" in table.stdout and "none" in table.stdout
    assert "wait up to REFLEXR_UNKNOWN_GRAPH_GRACE_S" in table.stderr


def test_status_shows_interruptions_and_skipped_boundaries(cli: Cli, client: Client) -> None:
    """Item 1 and 8: `status` shows the attempts that did not count and the boundaries not checkpointed."""
    run_id = client.enqueue("counter", {"key": "s", "n": 1})
    claim = client.store.claim(run_id, "token-1", lease_ttl_ms=60_000)
    client.store.save_checkpoint(
        claim.context(), Boundary("{}", seq=1, next_node="s2", notes=Notes(2, "s1: state x2"))
    )
    assert client.store.release(claim.context()) == "released"
    shown = " ".join(cli("status", run_id).stdout.split())
    assert (
        "attempt 1 (0/1 counted toward max attempts; 1 interrupted by shutdowns or Redis, not counted)"
        in shown
    )
    assert "skipped boundaries 2 (not checkpointed" in shown
    history = cli("history", run_id).stdout
    assert "boundaries_skipped" in history and "s1: state x2" in history


def test_enqueue_in_the_cli_says_when_no_live_worker_serves_the_graph(cli: Cli, published: None) -> None:
    out = cli("enqueue", "counter", "--input", '{"key": "c", "n": 1}')
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("warning: run ") and "no live worker serves graph 'counter'" in out.stderr


def test_wait_waits_for_a_foreign_runs_record_and_says_so_when_it_never_comes(client: Client) -> None:
    """A foreign producer's run has no record until a worker takes its first delivery: wait() does not
    raise RunNotFound at once, it waits for the record up to its timeout, then says what happened."""
    with pytest.raises(WaitTimeout, match=r"no run sent-but-never-taken appeared within 0\.3s"):
        client.wait("sent-but-never-taken", timeout=0.3)
