"""Issue 35 on a real fleet: an agent's tool that needs a person's approval waits holding no worker.

tests/ai/approval_graphs.py's ``ai_pay`` runs an agent whose ``pay`` tool requires approval; its
``HandleDeferredToolCalls`` handler posts the resume token to Redis, and the test answers it as
a person would: through the client, the CLI or HTTP.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.client import Client
from reflexr_graph.model import Status
from tests.ai import approval_graphs
from tests.fleet import test_waits as waits
from tests.fleet.conftest import Fleet
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REFS = "tests.ai.approval_graphs:pay_graph"


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
