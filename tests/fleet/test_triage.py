"""The triage example graph, run in process by the task body against a real Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import workers.examples.triage as example
from reflexr_graph import clock
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.task import handle
from reflexr_graph.model import Status
from tests.fleet.inproc import fleet_app
from tests.waiting import wait_for

DOCS = [
    {"id": "a", "title": "Primary database down", "body": "outage, data loss risk"},
    {"id": "b", "title": "Invoice charged twice", "body": "refund"},
    {"id": "c", "title": "Newsletter draft"},
]


@pytest.fixture
def app(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FleetApp]:
    monkeypatch.setenv("REFLEXR_REDIS_URL", redis_url)
    example._redis.cache_clear()
    app = fleet_app(redis_url, example.triage, max_attempts=2)
    yield app
    app.store().close()
    app.close()
    example._redis.cache_clear()


def test_triage_plans_classifies_each_document_and_reports(app: FleetApp) -> None:
    """plan -> map(classify) -> join -> assess -> decision -> escalate: an outage makes it urgent;
    steps get the run's idempotency key; each step ran once; checkpoints land at safe boundaries."""
    handle(
        app, "tri-1", (), {"graph": "triage", "inputs": {"documents": DOCS}, "idempotency_key": "ticket-7"}
    )
    info = app.store().get("tri-1")
    assert info.status is Status.SUCCEEDED, info
    assert info.output["verdict"] == "urgent" and info.output["urgent_documents"] == ["a"]
    assert info.output["by_category"] == {"billing": 1, "general": 1, "incident": 1}
    assert info.output["report_key"] == "ticket-7:report"
    assert example.executions(app.store().client, "tri-1") == {
        "plan": 1,
        "classify": 3,
        "assess": 1,
        "escalate": 1,
    }
    progressed = [e.fields["next_node"] for e in app.store().events("tri-1") if e.type == "run_progressed"]
    assert progressed[:2] == ["map", "assess"]


def test_an_escalation_that_needs_approval_waits_for_the_on_call_signal(app: FleetApp) -> None:
    """With require_approval, escalate pages on-call once and waits; the signal finishes the run, and
    nothing before the wait ran again (the page is a durable call)."""
    store = app.store()
    kwargs = {"graph": "triage", "inputs": {"documents": DOCS, "require_approval": True}}
    assert handle(app, "tri-3", (), kwargs).outcome.value == "suspended"
    info = store.get("tri-3")
    assert (info.status, info.waiting_for, info.next_node) == (Status.WAITING, "approval", "escalate")
    store.signal("tri-3", "approval", '{"approved": true, "by": "ana"}', dispatch_grace_ms=60_000)
    handle(app, "tri-3", (), kwargs)
    info = store.get("tri-3")
    assert info.status is Status.SUCCEEDED, info
    assert (info.output["verdict"], info.output["approval"]) == ("urgent", "approved by ana")
    assert example.executions(store.client, "tri-3") == {
        "plan": 1, "classify": 3, "assess": 1, "page": 1, "escalate": 1,
    }  # fmt: skip


def test_an_unanswered_escalation_escalates_once_its_timeout_passes(app: FleetApp) -> None:
    store = app.store()
    inputs = {"documents": DOCS, "require_approval": True, "approval_timeout_s": 0.2}
    handle(app, "tri-4", (), {"graph": "triage", "inputs": inputs})
    wake_at = store.get("tri-4").wake_at
    assert wake_at is not None
    wait_for(lambda: clock.now() >= wake_at, 5, "the approval timeout to pass")
    handle(app, "tri-4", (), {"graph": "triage", "inputs": inputs})
    info = store.get("tri-4")
    assert info.output["approval"] == "no answer within 0.2s: escalated without approval"


def test_routine_documents_are_filed(app: FleetApp) -> None:
    """The decision routes by class: without an urgent document the run takes the routine branch."""
    handle(app, "tri-2", (), {"graph": "triage", "inputs": {"documents": DOCS[1:]}})
    info = app.store().get("tri-2")
    assert (info.status, info.output["verdict"]) == (Status.SUCCEEDED, "routine")


def test_fail_until_fixed_is_dead_lettered_then_replays_after_the_fix(app: FleetApp) -> None:
    """The demo knob: classification fails until the fix key is set; the run is dead-lettered after
    max_attempts, then replayed once fixed, resuming after plan without running it again."""
    store = app.store()
    kwargs = {"graph": "triage", "inputs": {"documents": DOCS, "fail_until_fixed": True}}
    handle(app, "poison", (), kwargs)

    def retried() -> bool:
        handle(app, "poison", (), kwargs)  # dropped as early until its backoff has passed
        return store.get("poison").attempts == 2

    wait_for(retried, 5, "the retry to start once its backoff passed")
    info = store.get("poison")
    assert (info.status, info.attempts, info.reason) == (Status.DEAD, 2, "max_attempts")
    assert example.FIXED_KEY in (info.error or "")
    store.client.set(example.FIXED_KEY, "1")
    store.replay("poison")
    handle(app, "poison", (), kwargs)
    info = store.get("poison")
    assert info.status is Status.SUCCEEDED
    assert example.executions(store.client, "poison")["plan"] == 1


def test_invalid_triage_inputs_are_rejected_without_values(app: FleetApp) -> None:
    """G4/G6: invalid inputs are dead-lettered at once, naming every failing field, not its value."""
    handle(app, "bad", (), {"graph": "triage", "inputs": {"documents": [], "latency_s": -1}})
    info = app.store().get("bad")
    assert (info.status, info.reason) == (Status.DEAD, "invalid_inputs")
    assert "inputs.documents" in (info.error or "") and "inputs.latency_s" in (info.error or "")
