"""Issue 18: the work reflexr does around each step is done only where a step needs it.

No span without an OpenTelemetry SDK; no timeout scope nor deadline entry for a step without
a timeout; the execution key derived only for a step that asks for it; the node's inputs
written down once per boundary. Each test counts the work itself, never its time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run
from reflexr_graph.core import pg, steps
from reflexr_graph.core.deadlines import Deadlines
from reflexr_graph.core.driver import run_attempt
from reflexr_graph.core.readback import Codec
from tests.core import graphs
from tests.core.graphs import SEEN
from tests.core.harness import Harness

ROOT = Path(__file__).resolve().parents[2]


def _spans_started(redis_url: str, *flags: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.core.spans_probe", redis_url, *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names: list[str] = json.loads(done.stdout)
    return names


def test_an_attempt_starts_no_span_without_an_sdk(redis_url: str) -> None:
    """Neither the steps nor the attempt: a run enqueued without a trace has none to carry on."""
    assert _spans_started(redis_url) == []


def test_an_attempt_of_a_traced_run_carries_its_trace_on_without_an_sdk(redis_url: str) -> None:
    """A run enqueued in a trace: its attempt's API span holds that context for what the steps send."""
    assert _spans_started(redis_url, "--traced-run") == ["invoke_workflow"]


def test_each_step_has_its_span_with_an_sdk(redis_url: str) -> None:
    names = _spans_started(redis_url, "--sdk")
    assert names == ["invoke_workflow", "execute_step s0", "execute_step s1", "execute_step s2"]


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[tuple[Any, ...]]:
    """Replace ``owner.name`` with a wrapper that notes each call's arguments, then calls through."""
    calls: list[tuple[Any, ...]] = []
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_boundary_writes_the_next_inputs_down_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    action = graphs.linear("once")
    run_id = harness.create(action, 0)
    dumps = _counting(monkeypatch, Codec, "dump")
    assert harness.attempt(action, run_id) == 3
    ints = Counter(args[1] for args in dumps if isinstance(args[1], int))
    # 0: the graph inputs, checked once per attempt, and s0's inputs as s0 starts (no boundary
    # comes before the first step). 1 and 2: s1's and s2's inputs, at the boundary before each,
    # and not again by the step that keys its records by them. 3: the output.
    assert ints == {0: 2, 1: 1, 2: 1, 3: 1}


def asking(name: str) -> GraphAction:
    """a -> b -> c; only b asks for its step key (a and c read the idempotency key, which needs none)."""
    g = GraphBuilder(name=name, input_type=int, output_type=int)

    @g.step
    async def a(ctx: StepContext[None, None, int]) -> int:
        SEEN.setdefault("a", []).append(current_run().idempotency_key)
        return ctx.inputs + 1

    @g.step
    async def b(ctx: StepContext[None, None, int]) -> int:
        SEEN.setdefault("b", []).append(current_run().step_key)
        return ctx.inputs + 1

    @g.step
    async def c(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 1

    g.add(
        g.edge_from(g.start_node).to(a),
        g.edge_from(a).to(b),
        g.edge_from(b).to(c),
        g.edge_from(c).to(g.end_node),
    )
    return GraphAction(g.build())


def test_the_execution_key_is_derived_only_for_a_step_that_asks(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    action = asking("asks")
    digests = _counting(monkeypatch, steps, "digest")
    walks = _counting(monkeypatch, pg, "current_fork_stack")
    assert harness.attempt(action, harness.create(action, 0)) == 3
    (key,) = SEEN["b"]
    assert key is not None
    assert len(digests) == 1  # b's step key; a and c needed no key
    assert walks == []  # no fork reaches these steps: their branch path is known without their stack


def _deadlines_after(harness: Harness, action: Any) -> Deadlines:
    run_id = harness.create(action, 0)
    ctx = harness.claim(run_id)
    deadlines = Deadlines()
    asyncio.run(run_attempt(action, harness.store, ctx, inputs=0, deadlines=deadlines))
    return deadlines


def test_a_step_without_a_timeout_opens_no_scope_and_takes_no_deadline(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    scopes = _counting(monkeypatch, asyncio, "timeout")
    deadlines = _deadlines_after(harness, graphs.linear("untimed"))
    assert scopes == []
    assert deadlines.running() == ""  # no step was registered


def test_an_attempt_timeout_still_names_the_step_it_would_catch(harness: Harness) -> None:
    action = graphs.linear("timed_attempt")
    action.attempt_timeout = 60.0
    assert _deadlines_after(harness, action).running() == "s2"
