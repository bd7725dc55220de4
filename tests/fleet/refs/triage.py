"""A user's own graph that happens to be named like the bundled example."""

from __future__ import annotations

from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction

g = GraphBuilder(name="triage", input_type=str, output_type=str)


@g.step
async def route(ctx: StepContext[None, None, str]) -> str:
    return f"routed {ctx.inputs}"


g.add(g.edge_from(g.start_node).to(route), g.edge_from(route).to(g.end_node))
triage = GraphAction(g.build())
