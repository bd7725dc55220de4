"""Issue 35 on a real fleet: an agent's tool that needs a person's approval waits holding no worker.

tests/ai/approval_graphs.py's ``ai_pay`` runs an agent whose ``pay`` tool requires approval; its
``HandleDeferredToolCalls`` handler posts the resume token to Redis, and the test answers it as
a person would: through the client, the CLI or HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.ai import approval_graphs
from tests.fleet import test_waits as waits
from tests.fleet.conftest import Fleet
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REFS = "tests.ai.approval_graphs:pay_graph"
SECRET = "hunter2-private-value"


def logged(r: redis.Redis, run_id: str) -> list[str]:
    return [v.decode() for v in r.lrange(f"ai:{run_id}", 0, -1)]


def token_of(r: redis.Redis, run_id: str) -> str:
    key = approval_graphs.token_key(run_id)
    wait_for(lambda: r.llen(key), 60, "the handler to post the token")
    tokens = [t.decode() for t in r.lrange(key, 0, -1)]
    assert len(tokens) == 1, tokens
    return tokens[0]


def waiting(client: Client, run_id: str) -> bool:
    info = client.get(run_id)
    return info.status is Status.WAITING


def holds_nothing(client: Client, r: redis.Redis, fleet: Fleet, run_id: str) -> None:
    """The run waits for its event, holding no lease, no queued message and no worker."""
    info = client.get(run_id)
    assert info.status is Status.WAITING and info.waiting_for == "event:approve_payment", info
    waits.holds_nothing(client, r, fleet, "ai_pay")


def test_an_approval_runs_the_tool_once_and_asks_the_model_nothing_twice(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(REFLEXR_GRAPHS=REFS)
    client = client_for(fleet)
    run_id = client.enqueue("ai_pay", {"amount": 5})
    token = token_of(redis_client, run_id)
    wait_for(lambda: waiting(client, run_id), 30, "the run to wait")
    holds_nothing(client, redis_client, fleet, run_id)

    (pending,) = client.pending_events()
    assert (pending.run_id, pending.graph, pending.agent) == (run_id, "ai_pay", "payer")
    assert pending.name == "approve_payment" and pending.answer is None
    call = {"tool_call_id": "pay-1", "tool_name": "pay", "kind": "approval", "args": {"amount": 5}}
    assert pending.calls == [call]  # validated: the model sent "5"

    assert client.resolve_event(token, {"approvals": {"pay-1": True}}, by="alice") is True
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == "done: paid 5"
    # The resumed attempt is the second: the first model request and the handler are not made again.
    assert logged(redis_client, run_id) == ["model:1", "ask:1", "tool:2", "model:2"]
    assert client.pending_events() == []

    with pytest.raises(errors.EventAnswered, match="answered already by alice"):
        client.resolve_event(token, {"approvals": {"pay-1": False}})


def cli_env(fleet: Fleet) -> dict[str, str]:
    return {"REFLEXR_REDIS_URL": fleet.redis_url, "REFLEXR_QUEUE": fleet.queue}


def test_a_denial_through_the_cli_after_every_worker_was_killed_reaches_the_model_and_the_tool_never_runs(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = fleet.start(REFLEXR_GRAPHS=REFS)
    client = client_for(fleet)
    run_id = client.enqueue("ai_pay", {"amount": 5})
    token = token_of(redis_client, run_id)
    wait_for(lambda: waiting(client, run_id), 30, "the run to wait")
    first.kill_group()  # SIGKILL: nothing of the wait lives in a worker
    fleet.start(REFLEXR_GRAPHS=REFS)

    env = cli_env(fleet)
    listed = run_cli(["event", "list", "--json"], env, monkeypatch)
    assert listed.returncode == 0, listed.stderr
    assert [(w["run_id"], w["token"], w["calls"][0]["tool_name"]) for w in json.loads(listed.stdout)] == [
        (run_id, token, "pay")
    ]
    denial = {"approvals": {"pay-1": {"kind": "tool-denied", "message": "not this month"}}}
    denied = run_cli(["event", "resolve", token, "--value", json.dumps(denial)], env, monkeypatch)
    assert denied.returncode == 0, denied.stderr
    assert f"run {run_id} was waiting for it and is queued now" in denied.stdout

    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == "done: not this month"
    assert "tool:2" not in logged(redis_client, run_id) and logged(redis_client, run_id)[:2] == [
        "model:1",
        "ask:1",
    ]
    assert all(not entry.startswith("tool") for entry in logged(redis_client, run_id))

    again = run_cli(["event", "fail", token, "--reason", SECRET], env, monkeypatch)
    assert again.returncode == 1
    assert again.stderr.strip().count("\n") == 0, again.stderr
    assert "answered already by cli@" in again.stderr and SECRET not in again.stderr
    for bad, code, said in [
        ("not-a-token", 2, "this is not an event token"),
        (f"{run_id}~{'A' * 32}", 2, f"no wait of run {run_id} has this event token"),
    ]:
        refused = run_cli(
            ["event", "resolve", bad, "--value", json.dumps({"secret": SECRET})], env, monkeypatch
        )
        assert (refused.returncode, refused.stderr.strip().count("\n")) == (code, 0), refused.stderr
        assert said in refused.stderr and SECRET not in refused.stderr + refused.stdout


def test_a_timeout_denies_the_call_in_the_step_and_a_late_answer_is_refused(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(REFLEXR_GRAPHS=REFS)
    client = client_for(fleet)
    run_id = client.enqueue("ai_pay", {"amount": 5, "timeout_s": 2})
    token = token_of(redis_client, run_id)
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    # pydantic-ai's handler turns the wait's ExternalEventError into a denial the model reads.
    assert info.output == "done: No decision on this tool call arrived: no answer arrived within 2s"
    assert all(not entry.startswith("tool") for entry in logged(redis_client, run_id))
    with pytest.raises(errors.EventAnswered, match="timed out"):
        client.resolve_event(token, {"approvals": {"pay-1": True}})


def test_a_replay_after_the_answer_asks_nothing_again(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(REFLEXR_GRAPHS=REFS)
    client = client_for(fleet)
    run_id = client.enqueue("ai_pay", {"amount": 5, "fail_after": True})
    token = token_of(redis_client, run_id)
    wait_for(lambda: waiting(client, run_id), 30, "the run to wait")
    client.resolve_event(token, {"approvals": {"pay-1": True}})
    dead = client.wait(run_id, timeout=60)
    assert dead.status is Status.DEAD, dead  # the tool failed after the approval

    client.replay(run_id)
    info = client.wait(run_id, timeout=60)
    assert info.status is Status.SUCCEEDED, info
    assert info.output == "done: paid 5"
    # One model request, one handler call and one token before the replay; none of them again.
    assert [e.split(":")[0] for e in logged(redis_client, run_id)] == [
        "model",
        "ask",
        "tool",
        "tool",
        "model",
    ]
    assert redis_client.llen(approval_graphs.token_key(run_id)) == 1


def test_a_wait_called_directly_in_a_step_suspends_and_its_timeout_raises_there(
    fleet: Fleet, client_for: Callable[[Fleet], Client], redis_client: redis.Redis
) -> None:
    fleet.start(REFLEXR_GRAPHS="tests.ai.approval_graphs:review_graph")
    client = client_for(fleet)
    answered = client.enqueue("ai_review", {})
    timed_out = client.enqueue("ai_review", {"timeout_s": 2})
    wait_for(lambda: redis_client.llen(approval_graphs.review_key(answered)), 60, "the token")
    wait_for(lambda: waiting(client, answered), 30, "the run to wait")
    assert client.get(answered).waiting_for == "event:review"
    token = redis_client.lindex(approval_graphs.review_key(answered), 0)
    assert token is not None
    assert client.resolve_event(token.decode(), "looks good") is True
    info = client.wait(answered, timeout=60)
    assert (info.status, info.output) == (Status.SUCCEEDED, "reviewed: looks good"), info

    late = client.wait(timed_out, timeout=60)
    assert (late.status, late.output) == (Status.SUCCEEDED, "no review: no answer arrived within 2s"), late
    assert logged(redis_client, timed_out) == ["ask:1"]
