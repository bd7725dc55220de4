"""The ``reflexr_graph.run`` task body in process: message checks, dead letters, claims, and an
in-process worker (pytest-celery's legacy ``celery_worker`` fixture, on the fleet's own Celery app)
for the happy path: nothing here kills a process, so no worker subprocess is started."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from celery.contrib.testing.worker import TestWorkController
from celery.exceptions import Reject
from kombu import Message

from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.dispatch import TASK_NAME, graph_queue
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.guard import message_problem
from reflexr_graph.fleet.outcome import Outcome
from reflexr_graph.fleet.task import BadMessage, handle, parse_message
from reflexr_graph.model import Reason, Status, WorkerInfo
from reflexr_graph.store import keys
from tests.fleet import graphs
from tests.fleet.inproc import fleet_app, queued_messages
from tests.redis_server import RedisFactory

SECRET = "s3cr3t-4417"


@pytest.fixture
def app(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FleetApp]:
    # The test graphs record executions on the Redis named by REFLEXR_REDIS_URL.
    monkeypatch.setenv("REFLEXR_REDIS_URL", redis_url)
    graphs._redis.cache_clear()
    app = fleet_app(redis_url, *graphs.ALL)
    yield app
    app.store().close()
    app.close()


@pytest.fixture
def celery_app(app: FleetApp) -> FleetApp:
    """pytest-celery's ``celery_worker`` serves this app: the fleet's own, with its task and queues."""
    return app


@pytest.fixture
def celery_worker_parameters() -> dict[str, Any]:
    return {"perform_ping_check": False, "loglevel": "WARNING"}


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((1,), {"graph": "steps", "inputs": {}}, "positional argument"),
        ((), {"graph": "steps", "inputs": {}, "tenant": "x"}, "unexpected keyword argument(s) tenant"),
        ((), {"inputs": {}}, "'graph' is missing"),
        ((), {"graph": 7, "inputs": {}}, "'graph' is missing or not a non-empty string"),
        ((), {"graph": "steps", "inputs": {}, "idempotency_key": 5}, "'idempotency_key' must be"),
        ((), {"graph": "steps", "inputs": {"value": math.nan}}, "'inputs' is not plain JSON"),
        ((), {"graph": "steps", "inputs": {}, "state": {"x": math.inf}}, "'state' is not plain JSON"),
    ],
)
def test_parse_message_names_what_is_wrong(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: str
) -> None:
    """Each malformed message raises BadMessage(bad_message) saying what is wrong, never a value."""
    with pytest.raises(BadMessage) as err:
        parse_message(args, kwargs)
    assert err.value.reason is Reason.BAD_MESSAGE
    assert expected in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "reason", "words"),
    [
        ({"graph": "steps", "inputs": {"value": SECRET}}, "invalid_inputs", "value"),
        ({"graph": "steps", "inputs": {}, "state": {"steps": SECRET}}, "invalid_inputs", "state"),
        ({"graph": "steps"}, "bad_message", "'inputs' is missing"),
        ({"inputs": {"secret": SECRET}}, "bad_message", "'graph' is missing"),
    ],
)
def test_bad_messages_are_dead_lettered_with_a_reason(
    app: FleetApp, kwargs: dict[str, Any], reason: str, words: str
) -> None:
    """A message that cannot become a run is dead-lettered at once with a clear reason; the error
    never quotes input or state values (G6), and nothing raises out of the task."""
    handle(app, "bad-1", (), kwargs)
    info = app.store().get("bad-1")
    assert (info.status, info.reason) == (Status.DEAD, reason)
    assert words in (info.error or "")
    assert SECRET not in (info.error or "")
    assert [d.run_id for d in app.store().dead_letters()] == ["bad-1"]


def test_message_only_producer_gets_a_run_created_and_run(app: FleetApp) -> None:
    """A foreign producer sends only the message: the task creates the run record and runs it."""
    handle(app, "foreign-1", (), {"graph": "steps", "inputs": {"value": 4}, "idempotency_key": "k-1"})
    info = app.store().get("foreign-1")
    assert (info.status, info.output["value"], info.attempts) == (Status.SUCCEEDED, 4, 1)
    assert app.store().client.lrange(graphs.exec_key("foreign-1"), 0, -1) == [b"s1:1", b"s2:1", b"s3:1"]


def test_second_request_with_the_same_idempotency_key_is_dropped(app: FleetApp) -> None:
    """Two messages with different task ids but one idempotency key make one run."""
    kwargs = {"graph": "steps", "inputs": {"value": 1}, "idempotency_key": "order-9"}
    handle(app, "first", (), kwargs)
    handle(app, "second", (), kwargs)
    assert app.store().get("first").status is Status.SUCCEEDED
    assert [r.run_id for r in app.store().list_runs()] == ["first"]


def test_delivery_of_a_finished_run_runs_nothing(app: FleetApp) -> None:
    """A late duplicate of a finished run's message is dropped: no new attempt, no step."""
    kwargs = {"graph": "steps", "inputs": {"value": 1}}
    handle(app, "done-1", (), kwargs)
    handle(app, "done-1", (), kwargs)
    assert app.store().get("done-1").attempts == 1
    assert len(app.store().client.lrange(graphs.exec_key("done-1"), 0, -1)) == 3


def test_unusable_task_id_is_dropped_without_a_record(app: FleetApp) -> None:
    """A message whose task id cannot be a run id (empty, 1000 characters) is dropped, creating nothing."""
    handle(app, "", (), {"graph": "steps", "inputs": {}})
    handle(app, "x" * 1000, (), {"graph": "steps", "inputs": {}})
    assert app.store().list_runs() == []


def test_embedded_worker_runs_an_enqueued_run(app: FleetApp, celery_worker: TestWorkController) -> None:
    """Happy path through Celery: Client.enqueue sends the message, an in-process worker runs it."""
    schemas.publish(app.store(), graphs.ALL)
    with Client(app.reflexr_settings) as client:
        run_id = client.enqueue("steps", {"value": 11})
        info = client.wait(run_id, timeout=30)
        # A foreign producer's message on the base queue, with the inputs: the contract.
        foreign = "raw-" + run_id
        base = app.conf.task_default_queue
        client.app.send_task(
            TASK_NAME, kwargs={"graph": "steps", "inputs": {"value": 12}}, task_id=foreign, queue=base
        )
        other = client.wait(foreign, timeout=30)  # waits for the record the first delivery creates
    assert info.status is Status.SUCCEEDED and info.output == {
        "value": 11,
        "steps": ["s1", "s2", "s3"],
        "attempt": 1,
    }
    assert (other.status, other.output["value"]) == (Status.SUCCEEDED, 12)
    assert json.loads(json.dumps(info.output)) == info.output


def test_message_for_a_graph_nobody_serves_waits_for_a_worker(app: FleetApp) -> None:
    """Issue 14: a foreign message for a graph this worker lacks, which no live worker serves, is not
    dead-lettered: its run is recorded from the message and waits (due again soon) for a worker."""
    delivered = handle(app, "foreign-nope", (), {"graph": "nope", "inputs": {"x": 1}})
    assert delivered.outcome is Outcome.HELD
    info = app.store().get("foreign-nope")
    assert (info.status, info.graph) == (Status.QUEUED, "nope")
    assert [e.type for e in app.store().events("foreign-nope")][-1] == "waiting_for_worker"
    assert app.store().client.zscore(keys.due(keys.STANDALONE.of("foreign-nope")), "foreign-nope") is not None


def test_message_for_a_graph_another_worker_serves_is_forwarded(app: FleetApp) -> None:
    """Issue 14: a message for a graph this worker lacks goes on, as it came, to that graph's queue when a
    live worker serves it; no record is made here (the worker that runs it makes it)."""
    app.store().worker_beat(WorkerInfo(name="other@host", graphs=("docproc",)), ttl_ms=60_000)
    kwargs = {"graph": "docproc", "inputs": {"doc": 7}, "idempotency_key": "d-7"}
    assert handle(app, "fwd-1", (), kwargs).outcome is Outcome.FORWARDED
    queue = graph_queue(app.conf.task_default_queue, "docproc")
    [message] = queued_messages(app.store(), queue)
    assert (message["id"], message["kwargs"]) == ("fwd-1", kwargs)
    assert not app.store().client.exists(keys.run("fwd-1"))


def test_message_without_inputs_for_a_missing_record_is_a_bad_message(app: FleetApp) -> None:
    """A message naming only the graph (as the Client's do) for a run that has no record is dead-lettered:
    there are no inputs to create one from."""
    handle(app, "no-inputs", (), {"graph": "steps"})
    info = app.store().get("no-inputs")
    assert (info.status, info.reason) == (Status.DEAD, "bad_message")
    assert "'inputs' is missing" in (info.error or "")


def test_the_task_state_says_what_became_of_the_attempt(app: FleetApp) -> None:
    """Flower and celery events show the Celery task's state: a dead-lettered run's task fails
    (RunDeadLettered), a retried attempt's task fails (AttemptFailed), a finished one succeeds; both
    failures are expected exceptions (the task's throws), so Celery logs no traceback for them."""
    from reflexr_graph.errors import AttemptFailed, RunDeadLettered
    from reflexr_graph.fleet.task import report

    task = app.tasks[TASK_NAME]
    assert set(task.throws) == {AttemptFailed, RunDeadLettered}
    dead = handle(app, "p-1", (), {"graph": "permanent", "inputs": {}})
    with pytest.raises(RunDeadLettered, match="dead-lettered"):
        report(dead)
    retried = handle(app, "f-1", (), {"graph": "always_fails", "inputs": {}})
    with pytest.raises(AttemptFailed, match="step_failed"):
        report(retried)
    ok = report(handle(app, "ok-1", (), {"graph": "steps", "inputs": {}}))
    assert ok == {"run_id": "ok-1", "outcome": "succeeded", "reason": ""}


def test_redis_unreachable_before_the_claim_requeues_the_message(private_redis: RedisFactory) -> None:
    """G1: before the claim the message may be the run's only record, so with Redis down the task
    asks Celery to requeue it (Reject(requeue=True)) rather than acking it away."""
    server = private_redis()
    app = fleet_app(server.url, graphs.steps)
    server.kill()
    with pytest.raises(Reject) as err:
        handle(app, "run-x", (), {"graph": "steps", "inputs": {}})
    assert err.value.requeue is True
    app.close()


def _message(body: bytes, headers: Any, content_type: str = "application/json") -> Message:
    return Message(body=body, content_type=content_type, content_encoding="utf-8", headers=headers)


GOOD_HEADERS = {"id": "run-1", "task": "reflexr_graph.run", "timelimit": [None, None], "retries": 0}


@pytest.mark.parametrize(
    ("body", "headers", "problem"),
    [
        (b'[[], {"graph": "g", "inputs": {}}, {}]', GOOD_HEADERS, None),
        (b'[[], {"graph": "g", "inputs": {}}, null]', GOOD_HEADERS, None),
        (b'{"args": [], "kwargs": {}}', GOOD_HEADERS, None),
        (b'"just a string"', GOOD_HEADERS, "not [args, kwargs, embed]"),
        (b"42", GOOD_HEADERS, "not [args, kwargs, embed]"),
        (b"[[], {}]", GOOD_HEADERS, "not [args, kwargs, embed]"),
        (b"[{}, {}, {}]", GOOD_HEADERS, "args are not a list"),
        (b"[[], [], {}]", GOOD_HEADERS, "kwargs are not an object"),
        (b"[[], {}, 7]", GOOD_HEADERS, "embed part is not an object"),
        (b'{"args": 5}', GOOD_HEADERS, "'args' is not a list"),
        (b"[[], {}, {}]", {"task": "reflexr_graph.run"}, "'id' header"),
        (b"[[], {}, {}]", {**GOOD_HEADERS, "timelimit": 5}, "'timelimit' header"),
        (b"[[], {}, {}]", {**GOOD_HEADERS, "retries": "x"}, "'retries' header"),
    ],
)
def test_guard_names_message_shapes_that_would_crash_celery(
    body: bytes, headers: Any, problem: str | None
) -> None:
    """Bodies and headers that make Celery's worker raise in its main process are caught first."""
    found = message_problem(_message(body, headers), None)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found
