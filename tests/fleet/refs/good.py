"""A module with a GraphAction, a bare Graph, a duplicate name, and something that is neither."""

from __future__ import annotations

from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction


def _graph(name: str) -> GraphBuilder[None, None, int, int]:
    g = GraphBuilder(name=name, input_type=int, output_type=int)

    @g.step
    async def double(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs * 2

    g.add(g.edge_from(g.start_node).to(double), g.edge_from(double).to(g.end_node))
    return g


action = GraphAction(_graph("doubler").build())
bare = _graph("bare").build()
same_name = GraphAction(_graph("doubler").build())
not_a_graph = 42


class Holder:
    nested = GraphAction(_graph("nested").build())
