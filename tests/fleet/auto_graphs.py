"""Graphs whose runs wait for an approval, in two versions each, for the auto-upgrade tests
(``GraphAction(on_new_version=..., on_incompatible=...)``): a worker of the old versions loads
``OLD``, one of the new versions ``NEW`` (``REFLEXR_GRAPHS``).

Each graph is prepare -> review (waits for the signal ``approval``) -> close, and each step records
its execution as ``<node>@<version>:<attempt>`` (tests.fleet.graphs.record). The new version of
``autoflow`` and ``pinnedflow`` adds a step after close (their checkpoints at review still fit); that
of ``holdflow`` and ``restartflow`` renames review to ``review2`` (a checkpoint at review does not).
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, wait_for_signal
from reflexr_graph.core.action import OnIncompatible, OnNewVersion
from tests.fleet.graphs import Approval, Tally, record


class Doc(BaseModel):
    ticket: str = "t-1"


def _flow(
    name: str, version: str, behaviour: tuple[OnNewVersion, OnIncompatible], *, review: str, extra: bool
) -> GraphAction:
    g = GraphBuilder(name=name, state_type=Tally, input_type=Doc, output_type=dict[str, object])

    def seen(node: str, ctx: StepContext[Tally, None, object]) -> None:
        record(f"{node}@{version}")
        ctx.state.steps.append(f"{node}@{version}")

    @g.step
    async def prepare(ctx: StepContext[Tally, None, Doc]) -> Doc:
        seen("prepare", ctx)
        return ctx.inputs

    @g.step(node_id=review)
    async def review_step(ctx: StepContext[Tally, None, Doc]) -> str:
        seen(review, ctx)
        answer = await wait_for_signal("approval", Approval)
        return f"{ctx.inputs.ticket} approved by {answer.by}"

    @g.step
    async def close(ctx: StepContext[Tally, None, str]) -> str:
        seen("close", ctx)
        return ctx.inputs

    @g.step
    async def publish(ctx: StepContext[Tally, None, str]) -> str:
        seen("publish", ctx)
        return ctx.inputs

    @g.step
    async def done(ctx: StepContext[Tally, None, str]) -> dict[str, object]:
        return {"ran_on": version, "steps": ctx.state.steps}

    g.add(g.edge_from(g.start_node).to(prepare), g.edge_from(prepare).to(review_step))
    g.add(g.edge_from(review_step).to(close))
    if extra:
        g.add(g.edge_from(close).to(publish), g.edge_from(publish).to(done))
    else:
        g.add(g.edge_from(close).to(done))
    g.add(g.edge_from(done).to(g.end_node))
    on_new_version, on_incompatible = behaviour
    return GraphAction(
        g.build(),
        version=version,
        signals={"approval": Approval},
        on_new_version=on_new_version,
        on_incompatible=on_incompatible,
    )


AUTO, HOLD, RESTART, PINNED = "autoflow", "holdflow", "restartflow", "pinnedflow"

auto1 = _flow(AUTO, "a1", ("auto_upgrade", "hold"), review="review", extra=False)
auto2 = _flow(AUTO, "a2", ("auto_upgrade", "hold"), review="review", extra=True)
hold1 = _flow(HOLD, "h1", ("auto_upgrade", "hold"), review="review", extra=False)
hold2 = _flow(HOLD, "h2", ("auto_upgrade", "hold"), review="review2", extra=False)
restart1 = _flow(RESTART, "r1", ("auto_upgrade", "restart"), review="review", extra=False)
restart2 = _flow(RESTART, "r2", ("auto_upgrade", "restart"), review="review2", extra=False)
pinned1 = _flow(PINNED, "p1", ("pinned", "hold"), review="review", extra=False)
pinned2 = _flow(PINNED, "p2", ("pinned", "hold"), review="review", extra=True)

OLD = ",".join(f"tests.fleet.auto_graphs:{n}" for n in ("auto1", "hold1", "restart1", "pinned1"))
NEW = ",".join(f"tests.fleet.auto_graphs:{n}" for n in ("auto2", "hold2", "restart2", "pinned2"))
