"""Graphs that stream, loaded by worker subprocesses via ``REFLEXR_GRAPHS=tests.fleet.stream_graphs:NAME``.

``tokens``: ``intro`` emits one item on topic ``status``, then ``speak`` emits ``n`` tokens
``t0 ``, ``t1 `` ... with ``gap_s`` between them. With ``pause_at``, attempt 1 of ``speak`` stops
after that many tokens (recording ``speak:paused`` in ``exec:<run_id>``) until the test kills
its worker; with ``fail_at``, attempt 1 raises there instead. ``flood`` emits ``n`` items at once.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run, emit
from tests.fleet.graphs import GATE_TIMEOUT_S, record


class Spec(BaseModel):
    n: int = 50
    gap_s: float = 0.0
    pause_at: int | None = None
    fail_at: int | None = None


def _tokens() -> GraphAction:
    g = GraphBuilder(name="tokens", input_type=Spec, output_type=int)

    @g.step
    async def intro(ctx: StepContext[None, None, Spec]) -> Spec:
        record("intro")
        await emit({"phase": "intro"}, topic="status")
        return ctx.inputs

    @g.step
    async def speak(ctx: StepContext[None, None, Spec]) -> int:
        record("speak")
        spec, first = ctx.inputs, current_run().attempt == 1
        for i in range(spec.n):
            if first and spec.pause_at == i:
                record("speak-paused")
                await asyncio.sleep(GATE_TIMEOUT_S)  # until the test kills this worker
            if first and spec.fail_at == i:
                raise RuntimeError("failing mid-stream on purpose")
            await emit(f"t{i} ")
            if spec.gap_s:
                await asyncio.sleep(spec.gap_s)
        return spec.n

    g.add(
        g.edge_from(g.start_node).to(intro), g.edge_from(intro).to(speak), g.edge_from(speak).to(g.end_node)
    )
    return GraphAction(g.build())


def _flood() -> GraphAction:
    g = GraphBuilder(name="flood", input_type=int, output_type=int)

    @g.step
    async def pour(ctx: StepContext[None, None, int]) -> int:
        for i in range(ctx.inputs):
            await emit(i)
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(pour), g.edge_from(pour).to(g.end_node))
    return GraphAction(g.build())


tokens = _tokens()
flood = _flood()
ALL = [tokens, flood]
REFS = ",".join(f"tests.fleet.stream_graphs:{a.name}" for a in ALL)
