"""A graph whose step runs a pydantic-ai agent, for in-process and fleet tests.

Loaded by worker subprocesses via ``REFLEXR_GRAPHS=tests.ai.graphs:report``. The agent's model
is pydantic-ai's ``FunctionModel`` (a real model implementation, offline): it asks for one tool
call, then writes a draft that the agent's output validator rejects as too short, then the
report: three model requests and one tool call. Every model request and tool call is logged in
the run's list ``ai:<run_id>`` as ``model:<attempt>`` or ``tool:<attempt>``, so a test counts
them across processes.

``crash`` makes the first attempt fail right after the second model request returned, in the
output validator, so the second request is already recorded: ``raise`` raises there, ``block``
says so in ``ai:validating:<run_id>`` and waits there for the test to SIGKILL the worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import cache
from typing import Literal

import redis
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, current_run
from reflexr_graph.ai import durable_agent
from reflexr_graph.config.settings import Settings

BLOCK_TIMEOUT_S = 90.0
"""A blocked validator gives up after this long, so a test that never kills cannot hang a worker."""
DRAFT = "a draft"
SEEN: list[list[ModelMessage]] = []
"""The conversation each model request was given, for in-process tests (a worker's stays there)."""


class Ask(BaseModel):
    topic: str
    crash: Literal["raise", "block"] | None = None


class Facts(BaseModel):
    topic: str
    facts: list[str]


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=10)


def r() -> redis.Redis:
    # The worker's own Redis (REFLEXR_REDIS_URL), read lazily: tests set it per worker.
    return _redis(Settings().redis_url)


def log_key(run_id: str) -> str:
    return f"ai:{run_id}"


def validating_key(run_id: str) -> str:
    return f"ai:validating:{run_id}"


def log(what: str) -> None:
    run = current_run()
    r().rpush(log_key(run.run_id), f"{what}:{run.attempt}")


async def write(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: what it answers depends only on the conversation so far, as a real one's would."""
    log("model")
    SEEN.append(list(messages))
    answered = sum(isinstance(m, ModelResponse) for m in messages)
    requests = [m for m in messages if isinstance(m, ModelRequest)]
    if answered == 0:
        prompt = next(p.content for p in requests[0].parts if isinstance(p, UserPromptPart))
        return ModelResponse(
            parts=[ToolCallPart("lookup", {"topic": str(prompt).removeprefix("report on ")})]
        )
    if answered == 1:
        return ModelResponse(parts=[TextPart(DRAFT)])
    returned = next(p for m in requests for p in m.parts if isinstance(p, ToolReturnPart))
    return ModelResponse(parts=[TextPart(f"report: {returned.model_response_str()}")])


reporter = Agent(FunctionModel(write), name="reporter", deps_type=Ask, output_type=str)


@reporter.tool_plain
def lookup(topic: str) -> Facts:
    log("tool")
    return Facts(topic=topic, facts=[f"{topic} is old", f"{topic} is big"])


@reporter.output_validator
def long_enough(ctx: RunContext[Ask], output: str) -> str:
    run = current_run()
    if ctx.deps.crash and run.attempt == 1:
        _crash(ctx.deps.crash, run.run_id)
    if output == DRAFT:
        raise ModelRetry("too short: write the report with the facts")
    return output


def _crash(how: str, run_id: str) -> None:
    if how == "raise":
        raise RuntimeError("failed on purpose after the second model request")
    r().rpush(validating_key(run_id), b"1")
    deadline = time.monotonic() + BLOCK_TIMEOUT_S
    while time.monotonic() < deadline:  # the step's own wait for its kill, not a test wait
        time.sleep(0.05)  # a poll inside the step (it waits to be killed), not a fixed wait
    raise TimeoutError("the test never killed the worker")


durable_reporter = durable_agent(reporter)


def _report() -> GraphAction:
    g = GraphBuilder(name="ai_report", input_type=Ask, output_type=str)

    @g.step
    async def ask(ctx: StepContext[None, None, Ask]) -> str:
        result = await durable_reporter.run(f"report on {ctx.inputs.topic}", deps=ctx.inputs)
        return result.output

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build(), max_attempts=3)


report = _report()


# -- streaming: ``ai_talk`` streams a tool call, then the answer, to the run's topic "agent" -----

ANSWER = ("The ", "answer ", "is ", "42")


async def speak(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """The model, streamed: a tool call first, then ``ANSWER`` chunk by chunk. On attempt 1 it stops
    after the first chunk of the answer, says so in ``ai:validating:<run_id>``, and waits to be killed."""
    log("model")
    if not any(isinstance(m, ModelResponse) for m in messages):
        yield {0: DeltaToolCall(name="look", json_args='{"topic": "tea"}', tool_call_id="c1")}
        return
    run = current_run()
    for i, chunk in enumerate(ANSWER):
        if i == 1 and run.attempt == 1:
            r().rpush(validating_key(run.run_id), b"1")
            deadline = time.monotonic() + BLOCK_TIMEOUT_S
            while time.monotonic() < deadline:  # the step's own wait for its kill, not a test wait
                await asyncio.sleep(0.05)
            raise TimeoutError("the test never killed the worker")
        yield chunk


talker = Agent(FunctionModel(write, stream_function=speak), name="talker", output_type=str)


@talker.tool_plain
def look(topic: str) -> Facts:
    log("tool")
    return Facts(topic=topic, facts=[f"{topic} is old"])


durable_talker = durable_agent(talker, stream="agent")


def _talk() -> GraphAction:
    g = GraphBuilder(name="ai_talk", input_type=str, output_type=str)

    @g.step
    async def answer(ctx: StepContext[None, None, str]) -> str:
        return (await durable_talker.run(ctx.inputs)).output

    g.add(g.edge_from(g.start_node).to(answer), g.edge_from(answer).to(g.end_node))
    return GraphAction(g.build(), max_attempts=3)


talk = _talk()
