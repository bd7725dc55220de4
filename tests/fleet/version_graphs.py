"""Two versions of one graph, ``versioned``, for the rolling-deploy tests (G9), loaded by workers
with ``REFLEXR_GRAPHS=tests.fleet.version_graphs:v1`` (or ``:v2``).

v2 has one more step than v1, so its fingerprint (its version) differs. Each step records its
execution as ``<node>@<version>:<attempt>`` (tests.fleet.graphs.record), so a test counts what
ran where, across processes; ``Knobs.gate`` names the step that waits for its gate, as it records
itself (``s2@v1``). The second step makes a durable call first (:func:`lookup`), so a test sees
whether a resumed run found its record.
"""

from __future__ import annotations

from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run, durable_call
from tests.fleet import graphs
from tests.fleet.graphs import Knobs, Tally, visit

NAME = "versioned"


def calls_key(run_id: str) -> str:
    """Where ``lookup``, the durable call of the second step, records each time it is made."""
    return f"calls:{run_id}"


def lookup(node: str) -> str:
    graphs.r().rpush(calls_key(current_run().run_id), node)
    return node


class Owned(Tally):
    """v3's state: a field v1's states never had, so they no longer validate."""

    owner: str


def _versioned(
    tag: str, *, extra_step: bool, state_type: type[Tally] = Tally, second: str = "s2"
) -> GraphAction:
    g = GraphBuilder(name=NAME, state_type=state_type, input_type=Knobs, output_type=dict[str, object])

    @g.step
    async def s1(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
        return await visit(f"s1@{tag}", ctx)

    @g.step(node_id=second)
    async def s2(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
        await durable_call("lookup", lookup, f"{second}@{tag}")  # recorded before the step's gate
        return await visit(f"{second}@{tag}", ctx)

    @g.step
    async def s3(ctx: StepContext[Tally, None, Knobs]) -> dict[str, object]:
        await visit(f"s3@{tag}", ctx)
        return {"ran_on": tag, "steps": ctx.state.steps}

    g.add(g.edge_from(g.start_node).to(s1), g.edge_from(s1).to(s2))
    if extra_step:

        @g.step
        async def s2b(ctx: StepContext[Tally, None, Knobs]) -> Knobs:
            return await visit(f"s2b@{tag}", ctx)

        g.add(g.edge_from(s2).to(s2b), g.edge_from(s2b).to(s3))
    else:
        g.add(g.edge_from(s2).to(s3))
    g.add(g.edge_from(s3).to(g.end_node))
    return GraphAction(g.build())


v1 = _versioned("v1", extra_step=False)
v2 = _versioned("v2", extra_step=True)
v3 = _versioned("v3", extra_step=False, state_type=Owned)
"""Incompatible with v1's checkpoints: its state type requires ``owner``."""
v4 = _versioned("v4", extra_step=True, second="s2x")
"""Incompatible with v2's checkpoints at s2: that step is ``s2x`` now."""
