"""One claimed attempt, in process, against a real Redis: outcomes, fencing, leases, shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, RunFailure, clock
from reflexr_graph.errors import StoreUnavailable
from reflexr_graph.fleet import attempt, failure, redaction
from reflexr_graph.fleet.app import FleetApp
from reflexr_graph.fleet.outcome import Outcome
from reflexr_graph.model import Status
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet.inproc import claim, create_run, fleet_app
from tests.redis_server import RedisFactory
from tests.store.support import FakeClock

SECRET = "s3cr3t-value-7731"

Step = Callable[[int], Any]


def two_steps(name: str, second: Step, *, output_type: Any = int, tail: bool = False) -> GraphAction:
    """first (records itself) -> second(ctx.inputs) -> end; with ``tail``, a last step after second."""
    g = GraphBuilder(name=name, input_type=int, output_type=output_type)
    seen: list[str] = []

    @g.step
    async def first(ctx: StepContext[None, None, int]) -> int:
        seen.append("first")
        return ctx.inputs + 1

    @g.step
    async def then(ctx: StepContext[None, None, int]) -> Any:
        seen.append("then")
        result = second(ctx.inputs)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    @g.step
    async def last(ctx: StepContext[None, None, int]) -> int:
        seen.append("last")
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(first), g.edge_from(first).to(then))
    if tail:
        g.add(g.edge_from(then).to(last), g.edge_from(last).to(g.end_node))
    else:
        g.add(g.edge_from(then).to(g.end_node))
    action = GraphAction(g.build())
    action.seen = seen  # type: ignore[attr-defined]
    return action


@pytest.fixture
def store_of() -> Iterator[Callable[[FleetApp], RedisStore]]:
    apps: list[FleetApp] = []

    def get(app: FleetApp) -> RedisStore:
        apps.append(app)
        return app.store()

    yield get
    for app in apps:
        app.store().close()


def test_success_records_the_output(redis_url: str, store_of: Callable[[FleetApp], RedisStore]) -> None:
    """A claimed attempt runs the graph and records its output, fenced by its token."""
    action = two_steps("ok", lambda n: n * 10)
    app = fleet_app(redis_url, action)
    store = store_of(app)
    run_id = create_run(store, "ok", 1)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert (info.status, info.output, info.attempts) == (Status.SUCCEEDED, 20, 1)


def test_failed_step_retries_with_backoff_then_dead_letters(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """G4: a failing attempt makes the run due again after a backoff; the last allowed one dead-letters it,
    keeping the error and traceback; the step before the checkpoint ran once."""

    def boom(n: int) -> int:
        raise ValueError("no luck")

    action = two_steps("boom", boom)
    app = fleet_app(redis_url, action, max_attempts=2)
    store = store_of(app)
    run_id = create_run(store, "boom", 1, max_attempts=2)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert (info.status, info.reason) == (Status.RETRYING, "step_failed")
    assert store.client.zscore(keys.due(keys.STANDALONE.of(run_id)), run_id) is not None
    attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert (info.status, info.reason, info.attempts) == (Status.DEAD, "max_attempts", 2)
    assert info.error == "ValueError: no luck"
    tb = store.traceback(run_id)
    assert tb is not None and "ValueError: no luck" in tb and "Traceback" in tb
    assert action.seen == ["first", "then", "then"]  # type: ignore[attr-defined]


def test_permanent_failure_and_invalid_record_are_dead_at_once(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """G4: RunFailure(permanent=True) and inputs that do not validate dead-letter on the first attempt."""

    def refuse(n: int) -> int:
        raise RunFailure("cannot do this one", reason="refused", permanent=True)

    action = two_steps("refuse", refuse)
    app = fleet_app(redis_url, action)
    store = store_of(app)
    run_id = create_run(store, "refuse", 1)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    assert (store.get(run_id).status, store.get(run_id).reason) == (Status.DEAD, "refused")

    bad = create_run(store, "refuse", {"not": SECRET})
    attempt.run_claimed(app, store, claim(app, store, bad))
    info = store.get(bad)
    assert (info.status, info.reason, info.attempts) == (Status.DEAD, "invalid_inputs", 1)
    assert SECRET not in (info.error or "") and SECRET not in (store.traceback(bad) or "")


def test_validation_errors_are_stored_without_values(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """G6: a step's pydantic ValidationError quotes the bad value; the stored error and traceback do not."""

    class Card(BaseModel):
        number: int

    def validate(n: int) -> int:
        try:
            TypeAdapter(Card).validate_python({"number": SECRET})
        except Exception as exc:
            raise RuntimeError("card rejected") from exc
        return n

    action = two_steps("card", validate)
    app = fleet_app(redis_url, action)
    store = store_of(app)
    run_id = create_run(store, "card", 1)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    tb = store.traceback(run_id) or ""
    assert "ValidationError" in tb and "number" in tb
    assert SECRET not in tb and SECRET not in (store.get(run_id).error or "")


def test_output_that_is_not_json_fails_permanently(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """An output that cannot be written down dead-letters the run at once instead of retrying."""
    action = two_steps("nan", lambda n: float("nan"), output_type=float)
    app = fleet_app(redis_url, action)
    store = store_of(app)
    run_id = create_run(store, "nan", 1)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert (info.status, info.reason, info.attempts) == (Status.DEAD, "output_not_serializable", 1)


def test_stale_attempt_writes_nothing(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore], caplog: pytest.LogCaptureFixture
) -> None:
    """G3: an attempt whose run was taken over (its lease lapsed, another attempt claimed it) is
    fenced out at its first write: no checkpoint, no outcome."""
    fake = FakeClock()
    previous = clock.set_source(fake)
    try:
        action = two_steps("fenced", lambda n: n)
        app = fleet_app(redis_url, action)
        store = store_of(app)
        run_id = create_run(store, "fenced", 1)
        stale = claim(app, store, run_id)
        fake.advance(app.reflexr_settings.lease_ttl_ms + 1)
        claim(app, store, run_id)  # the takeover
        before = store.get(run_id)
        events_before = len(store.events(run_id))
        with caplog.at_level(logging.INFO, "reflexr_graph.fleet"):
            attempt.run_claimed(app, store, stale)
    finally:
        clock.set_source(previous)
    after = store.get(run_id)
    assert after == before and after.status is Status.RUNNING and after.checkpoints == 0
    assert len(store.events(run_id)) == events_before
    assert "records nothing more" in caplog.text


def test_store_unavailable_while_saving_a_checkpoint(
    private_redis: RedisFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """G1: Redis dies exactly as a step returns, so its checkpoint save fails with StoreUnavailable.
    The attempt ends without raising, records nothing, and leaves the run for the reaper;
    the earlier checkpoint is intact."""
    server = private_redis(appendfsync="always")

    def die(n: int) -> int:
        server.kill()
        return n

    action = two_steps("dies", die, tail=True)  # then's return is followed by a real boundary
    app = fleet_app(server.url, action)
    store = app.store()
    try:
        run_id = create_run(store, "dies", 1)
        with caplog.at_level(logging.WARNING, "reflexr_graph.fleet"):
            attempt.run_claimed(app, store, claim(app, store, run_id))
        assert "failed (store_unavailable" in caplog.text and "not recorded" in caplog.text
        # The retry said what it waited on, and for how long it may (it once waited silently).
        assert f"run {run_id}: checkpoint 2 not written yet" in caplog.text
        assert "retrying while the lease holds" in caplog.text
        server.start()
        info = store.get(run_id)
        assert (info.status, info.attempts, info.checkpoints, info.next_node) == (
            Status.RUNNING,
            1,
            1,
            "then",
        )
        assert (
            store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) is not None
        )  # the reaper's cue
    finally:
        store.close()


def test_unknown_graph_failure_gives_up_once_the_lease_would_lapse(
    private_redis: RedisFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker claims a run of a graph it does not have while Redis goes down: its unknown_graph
    failure is retried while the lease holds, like every write of an attempt, then given up
    (not recorded) so the reaper can take the run over; it does not retry forever."""
    server = private_redis(appendfsync="always")
    # A lease longer than the retry's longest pause (1 s), as any real one is.
    app = fleet_app(server.url, two_steps("served", lambda n: n), lease_ttl_s=3.0)
    store = app.store()
    try:
        run_id = create_run(store, "not_served", 1)
        claimed = claim(app, store, run_id)
        server.kill()
        ended: list[Any] = []
        worker = threading.Thread(
            target=lambda: ended.append(attempt.run_claimed(app, store, claimed)), daemon=True
        )
        with caplog.at_level(logging.WARNING, "reflexr_graph.fleet"):
            worker.start()
            worker.join(timeout=30)  # ten times the lease: far longer than the write may retry
        assert not worker.is_alive(), "the unknown_graph failure was still being retried after the lease"
        (delivered,) = ended
        assert delivered.outcome is Outcome.UNRECORDED
        assert "stayed unreachable while the lease held" in caplog.text
        server.start()
        info = store.get(run_id)
        assert (info.status, info.attempts) == (Status.RUNNING, 1)  # left to the reaper, as it was
        assert store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) is not None
    finally:
        store.close()


def test_lost_lease_cancels_the_attempt(redis_url: str, store_of: Callable[[FleetApp], RedisStore]) -> None:
    """A run cancelled mid-step: the heartbeat's renewal fails, it cancels the attempt within about
    TTL/3, and the attempt records nothing more (the run stays cancelled)."""
    holder: dict[str, str] = {}
    app_ref: list[FleetApp] = []

    async def cancel_then_hang(n: int) -> int:
        app_ref[0].store().cancel(holder["run_id"], now=True)
        await asyncio.sleep(60)  # cancelled by the heartbeat long before this ends
        return n

    action = two_steps("hang", cancel_then_hang)
    app = fleet_app(redis_url, action)
    app_ref.append(app)
    store = store_of(app)
    holder["run_id"] = run_id = create_run(store, "hang", 1)
    started = time.monotonic()
    attempt.run_claimed(app, store, claim(app, store, run_id))
    assert time.monotonic() - started < 30
    info = store.get(run_id)
    assert (info.status, info.reason) == (Status.CANCELLED, "cancelled")
    assert [e.type for e in store.events(run_id)][-1] == "run_cancelled"


def test_step_blocking_the_event_loop_keeps_its_lease(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """The heartbeat is a thread: a step that blocks the event loop with synchronous code for longer
    than the lease TTL still holds the lease, and the attempt succeeds."""
    holder: dict[str, Any] = {}

    def block_until_renewed_twice(n: int) -> int:
        store: RedisStore = holder["store"]
        first = store.client.zscore(keys.leases(keys.STANDALONE.of(holder["run_id"])), holder["run_id"])
        assert first is not None
        deadline = time.monotonic() + 30
        # Synchronous on purpose; returns once the lease was pushed a whole TTL past where it was.
        while (
            store.client.zscore(keys.leases(keys.STANDALONE.of(holder["run_id"])), holder["run_id"]) or 0
        ) < first + 1000:
            assert time.monotonic() < deadline, "the lease was not renewed while the loop was blocked"
            time.sleep(0.05)  # a poll of the lease: the step blocks its loop on purpose
        return n

    action = two_steps("blocker", block_until_renewed_twice)
    app = fleet_app(redis_url, action)
    holder["store"] = store = store_of(app)
    holder["run_id"] = run_id = create_run(store, "blocker", 1)
    attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert (info.status, info.attempts) == (Status.SUCCEEDED, 1)


def test_shutdown_mid_attempt_releases_the_lease(
    redis_url: str, store_of: Callable[[FleetApp], RedisStore]
) -> None:
    """Soft shutdown turns into SystemExit in the pool child: the attempt releases its lease (the run
    is due now, reason shutdown) and lets the exit proceed."""

    def exit_now(n: int) -> int:
        raise SystemExit(-253)  # what billiard's SIGQUIT handler raises

    action = two_steps("bye", exit_now)
    app = fleet_app(redis_url, action)
    store = store_of(app)
    run_id = create_run(store, "bye", 1)
    with pytest.raises(SystemExit):
        attempt.run_claimed(app, store, claim(app, store, run_id))
    info = store.get(run_id)
    assert info.status is Status.RETRYING
    assert store.client.zscore(keys.leases(keys.STANDALONE.of(run_id)), run_id) is None
    assert store.client.zscore(keys.due(keys.STANDALONE.of(run_id)), run_id) is not None
    assert [e.fields.get("reason") for e in store.events(run_id) if e.type == "run_retrying"] == ["shutdown"]


def test_safe_message_and_traceback_rewrite_validation_errors() -> None:
    """G6 helpers: locations and reasons are kept, values are not, through exception chains."""

    class Model(BaseModel):
        a: int

    try:
        try:
            Model.model_validate({"a": SECRET})
        except Exception as inner:
            raise KeyError("outer") from inner
    except KeyError as exc:
        tb = redaction.safe_traceback(exc)
        message = redaction.safe_message(exc.__cause__)  # type: ignore[arg-type]
    assert "a: Input should be a valid integer" in message
    assert SECRET not in tb and "KeyError" in tb and "led to the following" in tb
    assert failure.classify(RunFailure("x", reason="r", permanent=True)) == failure.Failure(
        "r", permanent=True
    )
    assert failure.classify(RuntimeError()) == failure.Failure("step_failed")
    unreachable = failure.classify(StoreUnavailable("Redis could not be reached"))
    assert unreachable == failure.Failure("store_unavailable", counted=False), (
        "Redis's failure, not the step's"
    )


def test_an_attempt_costs_one_round_trip_per_saved_boundary_plus_one(redis_url: str) -> None:
    """Performance by design: the claim brings the checkpoint, and the finished checkpoint rides in
    the success write; a three-step run makes two boundary saves and one succeed, nothing else.
    The saves go on the attempt's held connection (store/hot_path.py), past redis-py's client."""
    from tests.core import graphs

    action = graphs.linear(name="budget")
    app = fleet_app(redis_url, action, lease_ttl_s=30)  # no lease renewal falls inside the attempt
    store = app.store()
    run_id = create_run(store, "budget", 1)
    claimed = claim(app, store, run_id)
    sent: list[str] = []
    original = store.client.execute_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        sent.append(str(args[0]))
        return original(*args, **kwargs)

    store.preload_scripts()
    store.client.config_resetstat()
    store.client.execute_command = counting  # type: ignore[method-assign]
    try:
        attempt.run_claimed(app, store, claimed)
    finally:
        store.client.execute_command = original  # type: ignore[method-assign]
    assert sent == ["EVALSHA"], f"only the success goes through the client: {sent}"
    evalshas = store.client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert evalshas == 3, "two saves on the held connection, one succeed, nothing else"
    info = store.get(run_id)
    assert (info.status, info.checkpoints, info.output) == (Status.SUCCEEDED, 3, 4)
    ckpt = store.load_checkpoint(run_id)
    assert ckpt is not None and '"finished":true' in ckpt, "the finished checkpoint came with the outcome"
