"""In-process helpers: a FleetApp on the test Redis, runs created and claimed as a worker would."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from reflexr_graph.config.settings import Settings
from reflexr_graph.core.action import GraphAction
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.store.records import Claim, ClaimOutcome
from reflexr_graph.store.redis_store import RedisStore
from tests.waiting import wait_for


def fleet_app(redis_url: str, *actions: GraphAction, **overrides: Any) -> FleetApp:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "queue": f"inproc-{uuid.uuid4().hex[:8]}",
        "lease_ttl_s": 1.0,
        "max_attempts": 3,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.02,
        **overrides,
    }
    return create_app(Settings(**values), {a.name: a for a in actions})


def create_run(store: RedisStore, graph: str, inputs: Any, *, max_attempts: int = 3) -> str:
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    store.create_run(
        run_id,
        graph=graph,
        inputs_json=json.dumps(inputs),
        max_attempts=max_attempts,
        dispatch_grace_ms=60_000,
    )
    return run_id


def claim(app: FleetApp, store: RedisStore, run_id: str) -> Claim:
    """Claim as a delivery would once the retry is due (the tests' backoff is tens of milliseconds),
    reaping a lapsed lease first as the fleet's reaper would."""

    def attempt() -> Claim | None:
        result = store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=app.reflexr_settings.lease_ttl_ms)
        if result.outcome is ClaimOutcome.BUSY:
            store.reap()  # a lapsed lease is the reaper's to recover, as in the fleet
            return None
        return None if result.outcome is ClaimOutcome.EARLY else result

    result = wait_for(attempt, 5, "the retry backoff to pass", poll_s=0.005)
    assert result.claimed, result
    return result


def queued_messages(store: RedisStore, queue: str) -> list[dict[str, Any]]:
    """The Celery messages waiting in ``queue``, oldest first, as {id, eta, countdown, args, kwargs}."""
    out = []
    for raw in reversed(store.client.lrange(queue, 0, -1)):
        message = json.loads(raw)
        headers = message["headers"]
        body = (
            base64.b64decode(message["body"])
            if message["properties"]["body_encoding"] == "base64"
            else message["body"]
        )
        args, kwargs, _embed = json.loads(body)
        out.append({"id": headers["id"], "task": headers["task"], "eta": headers.get("eta"),
                    "countdown": headers.get("countdown"), "args": args, "kwargs": kwargs})  # fmt: skip
    return out
