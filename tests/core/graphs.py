"""Graphs for engine tests. Every step counts its executions in ``CALLS``; knobs make steps fail."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field
from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext, reduce_list_append

from reflexr_graph import GraphAction, SignalTimeout, current_run, durable_call, wait_for_signal

T = TypeVar("T")

CALLS: Counter[str] = Counter()
FAIL: Counter[str] = Counter()
"""node -> how many more times it raises."""
PHASE: dict[str, Any] = {}
"""Shared by the branches of a fork, so a test can order them without timing (siblings graphs)."""
SEEN: dict[str, list[Any]] = {}
"""node -> the inputs (or current_run) it saw, for tests that check what a resumed step received."""


class Boom(RuntimeError):
    pass


def reset() -> None:
    CALLS.clear()
    FAIL.clear()
    SEEN.clear()
    PHASE.clear()


def hit(node: str, value: Any = None) -> None:
    CALLS[node] += 1
    SEEN.setdefault(node, []).append(value)
    if FAIL[node] > 0:
        FAIL[node] -= 1
        raise Boom(f"{node} failed on purpose")


@dataclass
class Counted:
    steps: list[str] = field(default_factory=list)


# -- 1, 2, 3: a linear chain -------------------------------------------------------------


def linear(name: str = "linear", n: int = 3, *, transform: bool = False) -> GraphAction:
    g = GraphBuilder(name=name, state_type=Counted, input_type=int, output_type=int)
    steps = []
    for i in range(n):

        async def step(ctx: StepContext[Counted, None, int], _i: int = i) -> int:
            hit(f"s{_i}", current_run().idempotency_key)
            ctx.state.steps.append(f"s{_i}")
            return ctx.inputs + 1

        steps.append(g.step(step, node_id=f"s{i}"))
    g.add(g.edge_from(g.start_node).to(steps[0]))
    for i, (a, b) in enumerate(itertools.pairwise(steps)):
        edge = g.edge_from(a)
        g.add(edge.transform(lambda ctx: ctx.inputs).to(b) if transform and i == 0 else edge.to(b))
    g.add(g.edge_from(steps[-1]).to(g.end_node))
    return GraphAction(g.build())


# -- 5: plan, map, join ------------------------------------------------------------------


def map_join(*, closest: bool = False) -> GraphAction:
    g = GraphBuilder(name="map_join", state_type=Counted, input_type=int, output_type=int)

    @g.step
    async def plan(ctx: StepContext[Counted, None, int]) -> list[int]:
        hit("plan")
        return list(range(ctx.inputs))

    @g.step
    async def work(ctx: StepContext[Counted, None, int]) -> int:
        hit(f"work{ctx.inputs}")
        return ctx.inputs * 10

    collect = g.join(
        reduce_list_append,
        initial_factory=list[int],
        preferred_parent_fork="closest" if closest else "farthest",
    )

    @g.step
    async def total(ctx: StepContext[Counted, None, list[int]]) -> int:
        hit("total")
        return sum(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build())


# -- 6: broadcast into two steps, then a join -------------------------------------------


def broadcast() -> GraphAction:
    g = GraphBuilder(name="broadcast", state_type=Counted, input_type=int, output_type=list[int])

    @g.step
    async def first(ctx: StepContext[Counted, None, int]) -> int:
        hit("first")
        return ctx.inputs + 1

    @g.step
    async def left(ctx: StepContext[Counted, None, int]) -> int:
        hit("left")
        return ctx.inputs * 2

    @g.step
    async def right(ctx: StepContext[Counted, None, int]) -> int:
        hit("right")
        return ctx.inputs * 3

    both = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def done(ctx: StepContext[Counted, None, list[int]]) -> list[int]:
        hit("done")
        return sorted(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(left, right),
        g.edge_from(left, right).to(both),
        g.edge_from(both).to(done),
        g.edge_from(done).to(g.end_node),
    )
    return GraphAction(g.build())


# -- 7: decisions -------------------------------------------------------------------------


class Doc(BaseModel):
    text: str


class Urgent(Doc):
    pager: str = "ops"


def decision_after_step(*, annotate: str = "plain", explicit: dict[str, Any] | None = None) -> GraphAction:
    """start -> read -> decide(int | str) -> ... ; ``annotate`` picks read's return annotation."""
    g = GraphBuilder(name="decide", state_type=Counted, input_type=int, output_type=str)

    if annotate == "plain":

        @g.step(node_id="read")
        async def read(ctx: StepContext[Counted, None, int]) -> int:
            hit("read")
            return ctx.inputs
    elif annotate == "annotated":

        @g.step(node_id="read")
        async def read(ctx: StepContext[Counted, None, int]) -> Annotated[int, Field(gt=100)]:
            hit("read")
            return ctx.inputs
    elif annotate == "any":

        @g.step(node_id="read")
        async def read(ctx: StepContext[Counted, None, int]) -> Any:
            hit("read")
            return ctx.inputs
    elif annotate == "typevar":

        @g.step(node_id="read")
        async def read(ctx: StepContext[Counted, None, int]) -> T:  # type: ignore[type-var]
            hit("read")
            return ctx.inputs  # type: ignore[return-value]
    else:

        @g.step(node_id="read")
        async def read(ctx: StepContext[Counted, None, int]):  # type: ignore[no-untyped-def]
            hit("read")
            return ctx.inputs

    @g.step
    async def even(ctx: StepContext[Counted, None, int]) -> str:
        hit("even")
        return "even"

    @g.step
    async def odd(ctx: StepContext[Counted, None, int]) -> str:
        hit("odd")
        return "odd"

    decide = g.decision(node_id="decide").branch(g.match(int, matches=lambda x: x % 2 == 0).to(even))
    g.add(
        g.edge_from(g.start_node).to(read),
        g.edge_from(read).to(decide.branch(g.match(int).to(odd))),
        g.edge_from(even, odd).to(g.end_node),
    )
    return GraphAction(g.build(), input_types=explicit)


def decision_from_start() -> GraphAction:
    """start -> decide -> decide2 -> step: the first decision's type is the graph's input type."""
    g = GraphBuilder(name="from_start", state_type=Counted, input_type=int, output_type=str)

    @g.step
    async def big(ctx: StepContext[Counted, None, int]) -> str:
        hit("big")
        return "big"

    @g.step
    async def small(ctx: StepContext[Counted, None, int]) -> str:
        hit("small")
        return "small"

    inner = g.decision(node_id="decide2").branch(g.match(int, matches=lambda x: x > 10).to(big))
    inner = inner.branch(g.match(int).to(small))
    outer = g.decision(node_id="decide1").branch(g.match(int).to(inner))
    g.add(g.edge_from(g.start_node).to(outer), g.edge_from(big, small).to(g.end_node))
    return GraphAction(g.build())


class Level(StrEnum):
    URGENT = "urgent"


def decision_by_class() -> GraphAction:
    """classify says it returns str, but returns a Level (a str subclass) for urgent texts.

    Level.URGENT == "urgent", so it reads back equal through str, but as another class:
    the decision would route it to ``file`` instead of ``page`` on resume.
    """
    g = GraphBuilder(name="by_class", state_type=Counted, input_type=str, output_type=str)

    @g.step
    async def classify(ctx: StepContext[Counted, None, str]) -> str:
        hit("classify")
        return Level.URGENT if ctx.inputs.startswith("!") else ctx.inputs

    @g.step
    async def page(ctx: StepContext[Counted, None, Level]) -> str:
        hit("page")
        return "paged"

    @g.step
    async def file(ctx: StepContext[Counted, None, str]) -> str:
        hit("file")
        return "filed"

    decide = g.decision(node_id="decide").branch(g.match(Level).to(page)).branch(g.match(str).to(file))
    g.add(
        g.edge_from(g.start_node).to(classify),
        g.edge_from(classify).to(decide),
        g.edge_from(page, file).to(g.end_node),
    )
    return GraphAction(g.build())


class NoSchema:
    """A class pydantic has no schema for."""


def uninferable(case: str) -> GraphAction:
    """One graph per case of the seed's list of what inference cannot decide."""
    g = GraphBuilder(name=f"uninferable_{case}", state_type=Counted, input_type=int, output_type=str)

    @g.step
    async def a(ctx: StepContext[Counted, None, int]) -> int:
        hit("a")
        return ctx.inputs

    @g.step
    async def b(ctx: StepContext[Counted, None, int]) -> str:
        hit("b")
        return "b"

    @g.step
    async def c(ctx: StepContext[Counted, None, int]) -> str:
        hit("c")
        return "c"

    @g.step
    async def d(ctx: StepContext[Counted, None, str]) -> str:
        hit("d")
        return "d"

    decide = g.decision(node_id="decide").branch(g.match(int).to(b)).branch(g.match(str).to(d))
    if case == "transform":
        g.add(g.edge_from(g.start_node).to(a), g.edge_from(a).transform(lambda ctx: ctx.inputs).to(decide))
    elif case == "join":
        coll = g.join(reduce_list_append, initial_factory=list[int])
        decide = g.decision(node_id="decide").branch(g.match(list).to(d))  # type: ignore[arg-type]
        g.add(
            g.edge_from(g.start_node).to(a),
            g.edge_from(a).map().to(c),
            g.edge_from(c).to(coll),
            g.edge_from(coll).to(decide),
        )
    elif case == "fork":
        decide2 = g.decision(node_id="decide").branch(g.match(int).to(b))
        g.add(g.edge_from(g.start_node).to(a), g.edge_from(a).to(decide2, c))
    elif case == "noschema":

        @g.step
        async def opaque(ctx: StepContext[Counted, None, int]) -> NoSchema:
            hit("opaque")
            return NoSchema()

        g.add(g.edge_from(g.start_node).to(opaque), g.edge_from(opaque).to(decide))
    elif case == "mixed":

        @g.step
        async def e(ctx: StepContext[Counted, None, int]) -> str:
            hit("e")
            return "e"

        inner = g.decision(node_id="pick").branch(g.match(int).to(a)).branch(g.match(int).to(e))
        g.add(g.edge_from(g.start_node).to(inner), g.edge_from(a).to(decide), g.edge_from(e).to(decide))
    g.add(g.edge_from(b, c, d).to(g.end_node))
    # Some cases leave a step unreachable on purpose; only the edges into "decide" matter.
    return GraphAction(g.build(validate_graph_structure=False))


# -- 8, 9, 10: read-back, generators and streams -----------------------------------------


def float_step() -> GraphAction:
    g = GraphBuilder(name="floaty", state_type=Counted, input_type=int, output_type=float)

    @g.step
    async def give(ctx: StepContext[Counted, None, int]) -> int:
        hit("give")
        return 3

    @g.step(node_id="take")
    async def take(ctx: StepContext[Counted, None, float]) -> float:
        hit("take", ctx.inputs)
        return ctx.inputs

    g.add(g.edge_from(g.start_node).to(give), g.edge_from(give).to(take), g.edge_from(take).to(g.end_node))
    return GraphAction(g.build())


@dataclass
class Loose:
    anything: Any = None


def any_state() -> GraphAction:
    """A state field typed Any holding a model reads back as a dict: middle boundaries are skipped."""
    g = GraphBuilder(name="loose", state_type=Loose, input_type=str, output_type=str)

    @g.step
    async def put(ctx: StepContext[Loose, None, str]) -> str:
        hit("put")
        ctx.state.anything = Doc(text=ctx.inputs)
        return ctx.inputs

    @g.step
    async def mid(ctx: StepContext[Loose, None, str]) -> str:
        hit("mid")
        return ctx.inputs

    @g.step
    async def last(ctx: StepContext[Loose, None, str]) -> str:
        hit("last")
        return ctx.inputs

    g.add(
        g.edge_from(g.start_node).to(put),
        g.edge_from(put).to(mid),
        g.edge_from(mid).to(last),
        g.edge_from(last).to(g.end_node),
    )
    return GraphAction(g.build())


def generator_map() -> GraphAction:
    g = GraphBuilder(name="gen", state_type=Counted, input_type=int, output_type=list[int])

    @g.step
    async def produce(ctx: StepContext[Counted, None, int]) -> Iterator[int]:
        hit("produce")
        return iter(range(ctx.inputs))

    @g.step
    async def square(ctx: StepContext[Counted, None, int]) -> int:
        hit("square")
        return ctx.inputs * ctx.inputs

    coll = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def tidy(ctx: StepContext[Counted, None, list[int]]) -> list[int]:
        hit("tidy")
        return sorted(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(produce),
        g.edge_from(produce).map().to(square),
        g.edge_from(square).to(coll),
        g.edge_from(coll).to(tidy),
        g.edge_from(tidy).to(g.end_node),
    )
    return GraphAction(g.build(), input_types={"map": Any})


def stream_graph(*, payload: str, explicit: bool) -> GraphAction:
    """head -> tail, where tail is a g.stream step; ``payload`` 'model' hands it a Doc, 'json' a dict."""
    g = GraphBuilder(name=f"stream_{payload}", state_type=Counted, input_type=str, output_type=list[str])

    @g.step
    async def head(ctx: StepContext[Counted, None, str]) -> Any:
        hit("head")
        return Doc(text=ctx.inputs) if payload == "model" else {"text": ctx.inputs}

    @g.stream(node_id="tail")
    async def tail(ctx: StepContext[Counted, None, Any]) -> AsyncIterator[str]:
        hit("tail", ctx.inputs)
        text = ctx.inputs.text if isinstance(ctx.inputs, Doc) else ctx.inputs["text"]
        yield text

    coll = g.join(reduce_list_append, initial_factory=list[str])
    g.add(
        g.edge_from(g.start_node).to(head),
        g.edge_from(head).to(tail),
        g.edge_from(tail).map().to(coll),
        g.edge_from(coll).to(g.end_node),
    )
    return GraphAction(g.build(), input_types={"tail": Doc} if explicit else None)


@dataclass
class NodeState:
    seen: list[str] = field(default_factory=list)


@dataclass
class First(BaseNode[NodeState, None, str]):
    text: str

    async def run(self, ctx: GraphRunContext[NodeState, None]) -> Second:
        hit("First")
        return Second(text=self.text.upper())


@dataclass
class Second(BaseNode[NodeState, None, str]):
    text: str

    async def run(self, ctx: GraphRunContext[NodeState, None]) -> End[str]:
        hit("Second")
        return End(self.text)


def base_nodes() -> GraphAction:
    g = GraphBuilder(name="nodes", state_type=NodeState, input_type=str, output_type=str)

    @g.step
    async def begin(ctx: StepContext[NodeState, None, str]) -> First:
        hit("begin")
        return First(text=ctx.inputs)

    g.add(g.node(First), g.node(Second), g.edge_from(g.start_node).to(begin))
    return GraphAction(g.build())


# -- a step that waits for a person (issue 10) ----------------------------------------------------


class Approval(BaseModel):
    approved: bool
    by: str


@dataclass
class Ticket:
    notes: list[str] = field(default_factory=list)


def review_graph(*, timeout: float | None = None, name: str = "review") -> GraphAction:
    """prepare -> review (a durable call, then a wait for `approval`) -> close."""
    g = GraphBuilder(name=name, state_type=Ticket, input_type=str, output_type=str)

    @g.step
    async def prepare(ctx: StepContext[Ticket, None, str]) -> str:
        hit("prepare")
        ctx.state.notes.append("prepared")
        return ctx.inputs.upper()

    @g.step
    async def review(ctx: StepContext[Ticket, None, str]) -> str:
        hit("review")
        summary = await durable_call("summarize", lambda: hit("summarize") or f"summary of {ctx.inputs}")
        try:
            answer = await wait_for_signal("approval", Approval, timeout=timeout)
        except SignalTimeout:
            return f"{summary}: escalated"
        return f"{summary}: {'approved' if answer.approved else 'rejected'} by {answer.by}"

    @g.step
    async def close(ctx: StepContext[Ticket, None, str]) -> str:
        hit("close")
        return ctx.inputs

    g.add(
        g.edge_from(g.start_node).to(prepare),
        g.edge_from(prepare).to(review),
        g.edge_from(review).to(close),
        g.edge_from(close).to(g.end_node),
    )
    return GraphAction(g.build(), signals={"approval": Approval})


# -- issue 25 item 3: siblings in flight when a branch fails -----------------------------


async def _until(flag: str) -> None:
    while not PHASE.get(flag):
        await asyncio.sleep(0.005)


def map_siblings() -> GraphAction:
    """plan -> map(work) -> join -> total. Item 0 fails once every other item is running; the
    others finish a little after that failure (item ``PHASE["hang"]`` never does)."""
    g = GraphBuilder(name="map_siblings", state_type=Counted, input_type=int, output_type=int)

    @g.step
    async def plan(ctx: StepContext[Counted, None, int]) -> list[int]:
        hit("plan")
        PHASE["items"] = ctx.inputs
        return list(range(ctx.inputs))

    @g.step
    async def work(ctx: StepContext[Counted, None, int]) -> int:
        started = PHASE.setdefault("started", set())
        started.add(ctx.inputs)
        if ctx.inputs == 0:
            while len(started) < PHASE["items"]:
                await asyncio.sleep(0.005)
            PHASE["failed"] = True
            if "stop" in PHASE:
                PHASE.pop("stop").set()  # as a heartbeat that learnt of a cancel would
            hit("work0")  # raises while FAIL["work0"] says so
            return 0
        hit(f"work{ctx.inputs}")
        await _until("failed")
        if ctx.inputs == PHASE.get("hang"):
            await asyncio.Event().wait()
        await asyncio.sleep(0.05)  # still in flight when the driver sees the failure
        return ctx.inputs * 10

    collect = g.join(reduce_list_append, initial_factory=list[int])

    @g.step
    async def total(ctx: StepContext[Counted, None, list[int]]) -> int:
        hit("total")
        return sum(ctx.inputs)

    g.add(
        g.edge_from(g.start_node).to(plan),
        g.edge_from(plan).map().to(work),
        g.edge_from(work).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return GraphAction(g.build())


def broadcast_timeout() -> GraphAction:
    """first -> (slow | steady) -> join: slow runs past its step timeout while steady still runs."""
    g = GraphBuilder(name="broadcast_timeout", state_type=Counted, input_type=int, output_type=list[int])

    @g.step
    async def first(ctx: StepContext[Counted, None, int]) -> int:
        hit("first")
        return ctx.inputs

    @g.step
    async def slow(ctx: StepContext[Counted, None, int]) -> int:
        hit("slow")
        if PHASE.pop("slow_hangs", False):
            await asyncio.Event().wait()  # past its timeout
        return ctx.inputs * 2

    @g.step
    async def steady(ctx: StepContext[Counted, None, int]) -> int:
        hit("steady")
        await asyncio.sleep(0.5)  # outlasts slow's 0.1 s timeout
        return ctx.inputs * 3

    both = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(slow, steady),
        g.edge_from(slow, steady).to(both),
        g.edge_from(both).to(g.end_node),
    )
    return GraphAction(g.build(), step_timeouts={"slow": 0.1})
