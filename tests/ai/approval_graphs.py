"""An agent whose tool asks a person first, for fleet tests of external events (issue 35).

``ai_pay`` runs ``payer``: its model (an offline ``FunctionModel``) asks to ``pay`` an amount; the
tool requires approval, and ``HandleDeferredToolCalls`` hands the calls and a resume token to
``post_token``, which puts the token where a test reads it (Redis list ``ai:token:<run_id>``) and
returns None, so the run waits. Once answered, the model's second request sees the tool's result
or the denial, and writes it as the output. Every model request, tool call and handler call is
logged in ``ai:<run_id>`` as ``model:<attempt>``, ``tool:<attempt>``, ``ask:<attempt>``.

``timeout_s`` in the inputs bounds the wait: when it passes, the handler denies the call with
pydantic-ai's message. ``fail_after`` makes the tool raise on the first attempt that runs it (the
run is dead-lettered, its one attempt spent), for a replay test.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.external_events import ExternalEventError, wait_for_external_event
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run
from reflexr_graph.ai import durable_agent
from tests.ai.graphs import log, r


class Payment(BaseModel):
    amount: int
    timeout_s: float | None = None
    fail_after: bool = False


def token_key(run_id: str) -> str:
    return f"ai:token:{run_id}"


def paid_key(run_id: str) -> str:
    return f"ai:paid:{run_id}"


async def decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    log("model")
    answered = sum(isinstance(m, ModelResponse) for m in messages)
    if answered == 0:
        return ModelResponse(parts=[ToolCallPart("pay", {"amount": "5"}, tool_call_id="pay-1")])
    returned = next(
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    )
    return ModelResponse(parts=[TextPart(f"done: {returned.model_response_str()}")])


def post_token(
    ctx: RunContext[Payment], requests: DeferredToolRequests, token: str
) -> DeferredToolResults | None:
    log("ask")
    r().rpush(token_key(current_run().run_id), token)
    return None


payer = Agent(FunctionModel(decide), name="payer", deps_type=Payment, output_type=str)


@payer.tool(requires_approval=True)
def pay(ctx: RunContext[Payment], amount: int) -> str:
    log("tool")
    run_id = current_run().run_id
    if ctx.deps.fail_after and not r().getset(paid_key(run_id), b"1"):
        raise RuntimeError("the bank was down")
    return f"paid {amount}"


def _pay() -> GraphAction:
    g = GraphBuilder(name="ai_pay", input_type=Payment, output_type=str)

    @g.step
    async def run_payer(ctx: StepContext[None, None, Payment]) -> str:
        timeout = None if ctx.inputs.timeout_s is None else timedelta(seconds=ctx.inputs.timeout_s)
        handler = HandleDeferredToolCalls(post_token, timeout=timeout, name="approve_payment")
        agent = durable_agent(payer)
        result = await agent.run("pay the invoice", deps=ctx.inputs, capabilities=[handler])
        return result.output

    g.add(g.edge_from(g.start_node).to(run_payer), g.edge_from(run_payer).to(g.end_node))
    return GraphAction(g.build(), max_attempts=1)


pay_graph = _pay()


# -- ``ai_review``: wait_for_external_event called directly in a step, no agent ------------------


def review_key(run_id: str) -> str:
    return f"ai:review:{run_id}"


class Review(BaseModel):
    timeout_s: float | None = None


def _review() -> GraphAction:
    g = GraphBuilder(name="ai_review", input_type=Review, output_type=str)

    @g.step
    async def review(ctx: StepContext[None, None, Review]) -> str:
        def post(token: str) -> None:
            log("ask")
            r().rpush(review_key(current_run().run_id), token)

        timeout = None if ctx.inputs.timeout_s is None else timedelta(seconds=ctx.inputs.timeout_s)
        try:
            answer = await wait_for_external_event("review", ask=post, timeout=timeout)
        except ExternalEventError as error:
            return f"no review: {error}"
        return f"reviewed: {answer}"

    g.add(g.edge_from(g.start_node).to(review), g.edge_from(review).to(g.end_node))
    return GraphAction(g.build(), max_attempts=1)


review_graph = _review()
