"""Helpers shared by the store tests: a fake clock and shortcuts for common run setups."""

from __future__ import annotations

import itertools

from reflexr_graph.core.port import AttemptContext
from reflexr_graph.store import RedisStore

LEASE_MS = 30_000
_tokens = itertools.count(1)


class FakeClock:
    """A time source the test moves by hand; whole milliseconds so now_ms() is exact."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.ms = start_ms

    def __call__(self) -> float:
        return self.ms / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


def new_token() -> str:
    return f"token-{next(_tokens)}"


def make_run(
    store: RedisStore,
    run_id: str = "run-1",
    *,
    max_attempts: int = 3,
    idempotency_key: str | None = None,
    dispatch_grace_ms: int = 60_000,
    inputs_json: str = '{"n": 1}',
) -> str:
    created_id, created = store.create_run(
        run_id,
        graph="demo",
        inputs_json=inputs_json,
        state_json='{"count": 0}',
        idempotency_key=idempotency_key,
        max_attempts=max_attempts,
        dispatch_grace_ms=dispatch_grace_ms,
    )
    assert created and created_id == run_id
    return run_id


def start(store: RedisStore, run_id: str = "run-1", *, lease_ms: int = LEASE_MS) -> AttemptContext:
    """Claim the run under a fresh token and return the attempt's context."""
    claim = store.claim(run_id, new_token(), lease_ttl_ms=lease_ms)
    assert claim.claimed, claim
    return claim.context()


def fail_once(store: RedisStore, ctx: AttemptContext, *, permanent: bool = False, delay_ms: int = 0) -> str:
    """Fail the attempt; with the default ``delay_ms`` of 0 the retry is due at once, so a test can claim."""
    return store.fail(
        ctx,
        error_type="ValueError",
        message="step broke",
        traceback="Traceback (most recent call last):\n  ...\nValueError: step broke",
        reason="step_failed",
        permanent=permanent,
        retry_delay_ms=delay_ms,
    )
