"""Graphs with child runs, for tests/fleet/test_children.py: ``family`` runs ``kid`` children.

Loaded by workers with ``REFLEXR_GRAPHS=tests.fleet.child_graphs:family,tests.fleet.child_graphs:kid``.
Steps record each execution as tests/fleet/graphs.py does (``exec:<run id>``), so a test counts
them across processes.
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, RunFailure, current_run, run_child, sleep, start_child, wait_child
from tests.fleet.graphs import _wait_redis_gate, r, record


class Kid(BaseModel):
    n: int
    label: str = ""
    """Set on the one child that parks in its second step: its run id and pid go to ``pid:<label>``."""
    nap_s: float = 0.0
    fail_key: str = ""
    """The child fails for good while this Redis key exists."""


class Score(BaseModel):
    """A child's output: a model, so the parent sees it read back as one, not as JSON data."""

    value: int


class Family(BaseModel):
    children: int = 3
    label: str = ""
    fail_once: bool = False
    """The parent's step fails once, after its children ended."""
    nap_s: float = 0.0
    fail_key: str = ""
    """Given to the third child."""
    tags: dict[str, str] = {}


def _kid() -> GraphAction:
    """first (records) -> second (parks on a gate when labelled, naps, or fails) -> Score(n * 10)."""
    g = GraphBuilder(name="kid", input_type=Kid, output_type=Score)

    @g.step
    async def first(ctx: StepContext[None, None, Kid]) -> Kid:
        record("first")
        return ctx.inputs

    @g.step
    async def second(ctx: StepContext[None, None, Kid]) -> Score:
        record("second")
        kid = ctx.inputs
        if kid.fail_key and r().exists(kid.fail_key):
            raise RunFailure("this child fails for good", reason="kid_failed", permanent=True)
        if kid.label and current_run().attempt == 1:
            r().set(f"pid:{kid.label}", f"{current_run().run_id} {os.getpid()}")
            _wait_redis_gate()
        if kid.nap_s:
            await sleep(kid.nap_s)
        return Score(value=kid.n * 10)

    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(second),
        g.edge_from(second).to(g.end_node),
    )
    return GraphAction(g.build())


def _family() -> GraphAction:
    """spawn: its children run concurrently (one ``asyncio.gather``), and it returns their outputs."""
    g = GraphBuilder(name="family", input_type=Family, output_type=list[int])

    @g.step
    async def spawn(ctx: StepContext[None, None, Family]) -> list[int]:
        record("spawn")
        f = ctx.inputs
        kids = [
            Kid(
                n=i,
                label=f.label if i == 1 else "",
                nap_s=f.nap_s if i == 0 else 0.0,
                fail_key=f.fail_key if i == 2 else "",
            )
            for i in range(f.children)
        ]
        if f.children == 1:
            # start_child and wait_child, apart
            child = await start_child("kid", kids[0], tags=f.tags)
            outputs = [await wait_child(child, output_type=Score)]
        else:
            outputs = await asyncio.gather(*(run_child(kid_graph, kid, tags=f.tags) for kid in kids))
        if f.fail_once and r().incr(f"failed:{current_run().run_id}") == 1:
            raise RunFailure("fails once, after its children ended")
        return [score.value for score in outputs]  # each read back as the kid graph's Score

    g.add(g.edge_from(g.start_node).to(spawn), g.edge_from(spawn).to(g.end_node))
    return GraphAction(g.build())


kid_graph = _kid()
family = _family()
REFS = "tests.fleet.child_graphs:family,tests.fleet.child_graphs:kid_graph"
