"""Graphs for fleet tests, loaded by worker subprocesses via ``REFLEXR_GRAPHS=tests.fleet.graphs:NAME``.

Steps record every execution in Redis (``RPUSH exec:<run_id> <node>:<attempt>``), so a
test counts executions across processes. Knobs in the inputs make a step block until
the test opens a gate (so a test can kill a worker precisely mid-step), sleep, kill its
own process, or fail.

``shutdown_redis`` names a step that, on the first attempt, shuts the Redis server down
just before it returns, so the checkpoint save that follows is what finds Redis gone.

Gates: a gated step records its execution, then waits until the list ``gate:{<run_id>}``
or ``gate:{<run_id>}:<attempt>`` gets an item (a test opens attempt 2's gate up front to
let only the resumed attempt through), or until the file ``file_gate`` exists (for
tests that take Redis down while the step waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from functools import cache
from pathlib import Path

import redis
from pydantic import BaseModel, Field
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from reflexr_graph import (
    CallRetry,
    GraphAction,
    RunFailure,
    current_run,
    durable_call,
    sleep,
    wait_for_signal,
)
from reflexr_graph.config.settings import Settings
from reflexr_graph.store import connect

GATE_TIMEOUT_S = 90.0
"""A gated step gives up after this long, so a forgotten gate cannot hang a worker forever."""


class Knobs(BaseModel):
    value: int = 0
    gate: str | None = Field(None, description="the node that waits for its gate")
    file_gate: str | None = Field(
        None, description="a path the gated node waits for, instead of a Redis gate"
    )
    sleep_s: float = 0.0
    async_gate: bool = Field(
        False, description="wait for the gate without blocking the event loop (a step that can be cancelled)"
    )
    shutdown_redis: str | None = Field(None, description="the node that shuts Redis down (attempt 1 only)")
    secret: str | None = None


class Tally(BaseModel):
    steps: list[str] = []


EXECUTIONS_URL_ENV = "EXECUTIONS_REDIS_URL"
"""Where steps record executions and read gates, if not the worker's own Redis: the failover test
keeps them in a Redis that does not fail over, so the record survives what it measures."""


@cache
def _redis(url: str) -> redis.Redis:
    # The store's own connect: a redis+sentinel:// URL follows the primary through a failover.
    return connect.blocking_client(url, socket_timeout=10)


def r() -> redis.Redis:
    # The worker's own Redis (REFLEXR_REDIS_URL), read lazily: tests set it per worker.
    return _redis(os.environ.get(EXECUTIONS_URL_ENV) or Settings().redis_url)


def exec_key(run_id: str) -> str:
    return f"exec:{run_id}"


def gate_key(run_id: str, attempt: int | None = None) -> str:
    """The gate of every attempt of the run, or of one attempt. Its hash tag is the run id, so the
    two gates a step waits on with one BLPOP lie in one slot when the records are on a Redis Cluster
    (tests/cluster/test_cluster_crash.py)."""
    return f"gate:{{{run_id}}}" if attempt is None else f"gate:{{{run_id}}}:{attempt}"


def gate_keys(run_id: str, attempt: int) -> list[str]:
    return [gate_key(run_id), gate_key(run_id, attempt)]


def record(node: str) -> None:
    run = current_run()
    r().rpush(exec_key(run.run_id), f"{node}:{run.attempt}")


def _wait_redis_gate() -> None:
    run = current_run()
    deadline = time.monotonic() + GATE_TIMEOUT_S
    # Synchronous on purpose: the step blocks the event loop, and the lease must survive that.
    while time.monotonic() < deadline:
        if r().blpop(gate_keys(run.run_id, run.attempt), timeout=1):
            return
    raise TimeoutError(f"gate of run {run.run_id} never opened")


async def _await_redis_gate() -> None:
    run = current_run()
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while time.monotonic() < deadline:
        for key in gate_keys(run.run_id, run.attempt):
            if r().lpop(key):
                return
        await asyncio.sleep(0.05)  # the step's own polling: it yields, so it can be cancelled
    raise TimeoutError(f"gate of run {run.run_id} never opened")


def _wait_file_gate(path: str) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("file gate never opened")
        time.sleep(0.02)  # the step's own polling, not a test wait


async def _await_file_gate(path: str) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("file gate never opened")
        await asyncio.sleep(0.02)  # the step's own polling: it yields, as an awaiting step does


async def visit(node: str, ctx: StepContext[Tally, None, Knobs]) -> Knobs:
    record(node)
    knobs = ctx.inputs
    if knobs.sleep_s:
        await asyncio.sleep(knobs.sleep_s)
    if knobs.gate == node:
        if knobs.file_gate and knobs.async_gate:
            await _await_file_gate(knobs.file_gate)
        elif knobs.file_gate:
            _wait_file_gate(knobs.file_gate)
        elif knobs.async_gate:
            try:
                await _await_redis_gate()
            except asyncio.CancelledError:
                record(f"{node}-cleanup")  # interrupted (cancel --now): the step can clean up
                raise
        else:
            _wait_redis_gate()
    ctx.state.steps.append(node)
    if knobs.shutdown_redis == node and current_run().attempt == 1:
        _shutdown_redis()
    return knobs


def _shutdown_redis() -> None:
    # The server answers SHUTDOWN by closing the connection; the driver's checkpoint save,
    # right after this step returns, is then the first write to find Redis gone.
    with contextlib.suppress(redis.ConnectionError):
        r().shutdown()


# -- steps: s1 -> s2 -> s3, any of them gated ------------------------------------------------


def _steps() -> GraphAction:
    g = GraphBuilder(name="steps", state_type=Tally, input_type=Knobs, output_type=dict[str, object])

    @g.step
    async def s1(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
        return await visit("s1", ctx)

    @g.step
    async def s2(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
        return await visit("s2", ctx)

    @g.step
    async def s3(ctx: StepContext[Tally, None, Knobs]) -> dict[str, object]:
        await visit("s3", ctx)
        run = current_run()
        return {"value": ctx.inputs.value, "steps": ctx.state.steps, "attempt": run.attempt}

    g.add(
        g.edge_from(g.start_node).to(s1),
        g.edge_from(s1).to(s2),
        g.edge_from(s2).to(s3),
        g.edge_from(s3).to(g.end_node),
    )
    return GraphAction(g.build())


# -- failing graphs: s1, then a step that fails in some way ------------------------------------


def _failing(name: str, how: str) -> GraphAction:
    g = GraphBuilder(name=name, state_type=Tally, input_type=Knobs, output_type=int)

    @g.step
    async def s1(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
        return await visit("s1", ctx)

    @g.step
    async def bad(ctx: StepContext[Tally, None, Knobs]) -> int:
        record("bad")
        if how == "raise":
            raise RuntimeError("boom on purpose")
        if how == "permanent":
            raise RunFailure("this document can never be processed", reason="bad_document", permanent=True)
        os.kill(os.getpid(), signal.SIGKILL)
        return 0  # never reached

    g.add(g.edge_from(g.start_node).to(s1), g.edge_from(s1).to(bad), g.edge_from(bad).to(g.end_node))
    return GraphAction(g.build())


# -- issue 9: a map whose finished branches must not run again, and a step's durable calls ----


class Fan(BaseModel):
    items: int = 10
    hold: int | None = Field(None, description="the item whose step waits for its gate (async)")
    fail: int | None = Field(
        None, description="the item that raises on attempt 1 once every item runs; the others finish after"
    )


HOLD, FAIL, AFTER_FAIL = 1, 2, 3
"""How plan marks an item for its step (kind * 10000 + item), which sees only the item."""


async def _fail_among_siblings(item: int, fails: bool) -> None:
    """The failing item raises once every item's step is running; the others finish after that."""
    run_id = current_run().run_id
    items = int(r().get(f"items:{run_id}") or 0)
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while time.monotonic() < deadline:
        seen = r().lrange(exec_key(run_id), 0, -1)
        if fails and sum(e.startswith(b"work") for e in seen) >= items:
            r().rpush(exec_key(run_id), f"raised{item}:1")
            raise RuntimeError(f"item {item} fails on purpose")
        if not fails and any(e.startswith(b"raised") for e in seen):
            await asyncio.sleep(0.5)  # still running when the failure reaches the driver
            return
        await asyncio.sleep(0.02)  # the step's own polling: it yields to its siblings
    raise TimeoutError(f"the items of run {run_id} never all ran")


def _fanout() -> GraphAction:
    """plan -> map over ``items`` -> work (per item) -> join -> total."""
    g = GraphBuilder(name="fanout", state_type=Tally, input_type=Fan, output_type=list[int])

    @g.step
    async def plan(ctx: StepContext[Tally, None, Fan]) -> list[int]:
        record("plan")
        knobs = ctx.inputs

        def kind(i: int) -> int:
            if i == knobs.hold:
                return HOLD
            if knobs.fail is not None:
                return FAIL if i == knobs.fail else AFTER_FAIL
            return 0

        r().set(f"items:{current_run().run_id}", knobs.items, ex=600)
        # The item's kind is encoded in the item, so its step knows what to do.
        return [kind(i) * 10000 + i for i in range(knobs.items)]

    @g.step
    async def work(ctx: StepContext[Tally, None, int]) -> int:
        item, kind = ctx.inputs % 10000, ctx.inputs // 10000
        record(f"work{item}")
        if kind == HOLD:
            await _await_redis_gate()
        elif kind in (FAIL, AFTER_FAIL) and current_run().attempt == 1:
            await _fail_among_siblings(item, kind == FAIL)
        return item * 10

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Tally, None, list[int]]) -> list[int]:
        record("total")
        return sorted(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build())


class Calls(BaseModel):
    calls: int = 4
    kill_before: int = 3
    loop: bool = False


def _calls() -> GraphAction:
    """One step that makes ``calls`` durable calls (one name in a loop, or distinct names), and on its
    first attempt SIGKILLs its own worker right before call ``kill_before``."""
    g = GraphBuilder(name="calls", input_type=Calls, output_type=list[int])

    def service(n: int) -> int:
        record(f"call{n}")
        return n * n

    @g.step
    async def ask(ctx: StepContext[None, None, Calls]) -> list[int]:
        results = []
        for n in range(ctx.inputs.calls):
            if n == ctx.inputs.kill_before and current_run().attempt == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            results.append(await durable_call("service" if ctx.inputs.loop else f"service{n}", service, n))
        return results

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build())


class Flaky(BaseModel):
    retry_after: float = 0.3
    """What the first failure asks to wait (a RunFailure's retry_after); the second is a plain 503."""


def _flaky_call() -> GraphAction:
    """One step whose durable call, under a CallRetry of 3 tries, fails twice (a 429 asking for
    ``retry_after``, then a ConnectionError), then answers: issue 34's flaky model."""
    g = GraphBuilder(name="flaky_call", input_type=Flaky, output_type=str)

    def model(asked: float) -> str:
        record("model")
        tries = sum(1 for e in r().lrange(exec_key(current_run().run_id), 0, -1) if e.startswith(b"model:"))
        if tries == 1:
            raise RunFailure("429 from the provider", retry_after=asked)
        if tries == 2:
            raise ConnectionError("503 from the provider")
        return "answer"

    @g.step
    async def summarize(ctx: StepContext[None, None, Flaky]) -> str:
        record("summarize")
        policy = CallRetry(max_attempts=3, backoff_s=0.05, backoff_max_s=1.0)
        return await durable_call("model", model, ctx.inputs.retry_after, retry=policy)

    g.add(g.edge_from(g.start_node).to(summarize), g.edge_from(summarize).to(g.end_node))
    return GraphAction(g.build(), max_attempts=1)


class Approval(BaseModel):
    approved: bool
    by: str


class Review(BaseModel):
    ticket: str = "t-1"
    kill: str | None = Field(
        None, description="'before_wait': SIGKILL the worker before the wait; 'after_suspend': right after"
    )


def _approve() -> GraphAction:
    """prepare -> review (a durable call, then a wait for ``approval``) -> close. ``kill`` SIGKILLs the
    worker on the first attempt just before the wait, or just after the run was suspended."""
    g = GraphBuilder(name="approve", input_type=Review, output_type=str)

    @g.step
    async def prepare(ctx: StepContext[None, None, Review]) -> Review:
        record("prepare")
        return ctx.inputs

    def summarize(ticket: str) -> str:
        record("summarize")
        return f"summary of {ticket}"

    @g.step
    async def review(ctx: StepContext[None, None, Review]) -> str:
        record("review")
        summary = await durable_call("summarize", summarize, ctx.inputs.ticket)
        first = current_run().attempt == 1
        if ctx.inputs.kill == "before_wait" and first:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            answer = await wait_for_signal("approval", Approval)
        except BaseException:
            if ctx.inputs.kill == "after_suspend" and first:
                os.kill(os.getpid(), signal.SIGKILL)  # the run is waiting: the message is not acked yet
            raise
        return f"{summary}: {'approved' if answer.approved else 'rejected'} by {answer.by}"

    @g.step
    async def close(ctx: StepContext[None, None, str]) -> str:
        record("close")
        return ctx.inputs

    g.add(
        g.edge_from(g.start_node).to(prepare),
        g.edge_from(prepare).to(review),
        g.edge_from(review).to(close),
        g.edge_from(close).to(g.end_node),
    )
    return GraphAction(g.build(), signals={"approval": Approval})


def _napper() -> GraphAction:
    """One step that sleeps durably for its input's seconds, then returns them."""
    g = GraphBuilder(name="napper", input_type=float, output_type=float)

    @g.step
    async def nap(ctx: StepContext[None, None, float]) -> float:
        record("nap")
        await sleep(ctx.inputs)
        record("woke")
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(nap), g.edge_from(nap).to(g.end_node))
    return GraphAction(g.build())


class Bulk(BaseModel):
    text: str = ""
    done: list[int] = []
    kill_at: int = Field(-1, description="SIGKILL the worker in this lap, on the first attempt")


BULKY_LAPS = 20


def _bulky() -> GraphAction:
    """``lap`` runs 20 times over a state as large as the caller made it (a loop through a
    decision, a checkpoint after each lap), then returns the laps done and the text's length."""
    g = GraphBuilder(name="bulky", state_type=Bulk, input_type=int, output_type=list[int])

    @g.step
    async def lap(ctx: StepContext[Bulk, None, int]) -> int:
        record(f"lap{ctx.inputs}")
        if ctx.inputs == ctx.state.kill_at and current_run().attempt == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        ctx.state.done.append(ctx.inputs)
        return ctx.inputs + 1

    @g.step
    async def finish(ctx: StepContext[Bulk, None, int]) -> list[int]:
        return [*ctx.state.done, len(ctx.state.text)]

    again = g.decision(node_id="again").branch(g.match(int, matches=lambda n: n < BULKY_LAPS).to(lap))
    g.add(
        g.edge_from(g.start_node).to(lap),
        g.edge_from(lap).to(again.branch(g.match(int).to(finish))),
        g.edge_from(finish).to(g.end_node),
    )
    return GraphAction(g.build())


steps = _steps()
always_fails = _failing("always_fails", "raise")
permanent = _failing("permanent", "permanent")
kills_worker = _failing("kills_worker", "kill")
fanout = _fanout()
calls = _calls()
flaky_call = _flaky_call()
approve = _approve()
napper = _napper()
bulky = _bulky()

ALL = (steps, always_fails, permanent, kills_worker, fanout, calls, approve, napper, flaky_call)
REFS = ",".join(f"tests.fleet.graphs:{a.name}" for a in ALL)
BULKY_REFS = f"{REFS},tests.fleet.graphs:bulky"
"""REFS and the large-state graph, which only the payload tests load."""
