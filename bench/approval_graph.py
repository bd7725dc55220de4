"""The approvals benchmark's graph (section 5b), loaded only by that benchmark's worker, so the other
workers do not import pydantic-ai: ``REFLEXR_GRAPHS=...,bench.approval_graph:approver``.

``bench_approve`` runs the agent ``bench_payer``: its offline ``FunctionModel`` asks to ``pay``, a
tool that requires approval; ``HandleDeferredToolCalls`` hands the resume token to ``post_token``,
which pushes it onto ``bench:token:<run_id>`` and answers nothing, so the run waits. The step
records each of its starts as ``bench_wait`` does (fleet_graph.starts_key), and the tool when it
runs in ``bench:tool:<run_id>`` (the worker's clock, same host as the benchmark).
"""

from __future__ import annotations

import json
import time

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_graph import GraphBuilder, StepContext

from bench.fleet_graph import starts_key, worker_redis
from reflexr_graph import GraphAction, current_run
from reflexr_graph.ai import durable_agent

CALL_ID = "pay-1"
WAIT_NAME = "approve"


def token_key(run_id: str) -> str:
    return f"bench:token:{run_id}"


def tool_key(run_id: str) -> str:
    return f"bench:tool:{run_id}"


async def _decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if not any(isinstance(m, ModelResponse) for m in messages):
        return ModelResponse(parts=[ToolCallPart("pay", {"amount": 5}, tool_call_id=CALL_ID)])
    return ModelResponse(parts=[TextPart("done")])


def _post_token(
    ctx: RunContext[None], requests: DeferredToolRequests, token: str
) -> DeferredToolResults | None:
    worker_redis().rpush(token_key(current_run().run_id), token)
    return None


bench_payer = Agent(FunctionModel(_decide), name="bench_payer", output_type=str)


@bench_payer.tool(requires_approval=True)
def pay(ctx: RunContext[None], amount: int) -> str:
    worker_redis().rpush(tool_key(current_run().run_id), json.dumps({"t": time.time()}))
    return f"paid {amount}"


def _approver() -> GraphAction:
    g = GraphBuilder(name="bench_approve", input_type=int, output_type=str, auto_instrument=False)

    @g.step
    async def ask(ctx: StepContext[None, None, int]) -> str:
        run = current_run()
        worker_redis().rpush(starts_key(run.run_id), json.dumps({"t": time.time(), "attempt": run.attempt}))
        handler = HandleDeferredToolCalls(_post_token, name=WAIT_NAME)
        result = await durable_agent(bench_payer).run("pay the invoice", capabilities=[handler])
        return result.output

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build(), max_attempts=1)


approver = _approver()
