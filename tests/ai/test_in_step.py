"""Issue 9 part 3: a pydantic-ai agent inside a step asks its model only for what no attempt recorded.

In process: real attempts (the driver, the journal, real Redis) of graphs whose steps run agents
on pydantic-ai's FunctionModel; a failed attempt is followed by the retry a worker would make.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from pydantic_ai import Agent, FunctionToolset, ModelRetry, RunContext
from pydantic_ai.exceptions import ModelHTTPError, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.toolsets import DynamicToolset
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import CallRetry, GraphAction, RunFailure
from reflexr_graph.ai import StepDurability, durable_agent
from reflexr_graph.errors import DurableAgentError
from reflexr_graph.store import keys
from reflexr_graph.store.ops import drive
from reflexr_graph.store.streams import stream_page
from tests.ai import graphs
from tests.core.harness import Harness

pytestmark = pytest.mark.timeout(60)


def logged(r: redis.Redis, run_id: str) -> list[str]:
    return [v.decode() for v in r.lrange(graphs.log_key(run_id), 0, -1)]


def recorded_names(r: redis.Redis, run_id: str) -> list[str]:
    """The durable call names of the run's records (``c|node|path|digest|name|n``), sorted."""
    return sorted(k.decode().split("|")[-2] for k in r.hkeys(keys.memo(run_id)) if k.startswith(b"c|"))


def test_a_retry_asks_the_model_only_for_the_requests_not_recorded(
    harness: Harness, redis_client: redis.Redis
) -> None:
    """Three model requests and one tool call; attempt 1 fails after the second request returned.
    The retry answers requests 1 and 2 and the tool call from their records: across both attempts
    the model function ran 3 times and the tool once, and the output equals an uncrashed run's."""
    clean = harness.create(graphs.report, {"topic": "tea"})
    expected = harness.attempt(graphs.report, clean)
    assert logged(redis_client, clean) == ["model:1", "tool:1", "model:1", "model:1"]
    assert expected.startswith("report: ") and "tea is big" in expected

    run_id = harness.create(graphs.report, {"topic": "tea", "crash": "raise"})
    graphs.SEEN.clear()
    with pytest.raises(RuntimeError, match="on purpose"):
        harness.attempt(graphs.report, run_id)
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1"]
    assert recorded_names(redis_client, run_id) == [
        "reporter.model",
        "reporter.model",
        "reporter.tool.lookup",
    ]

    assert harness.attempt(graphs.report, run_id) == expected
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1", "model:2"]


def responses(messages: list[ModelMessage]) -> list[ModelResponse]:
    return [m for m in messages if isinstance(m, ModelResponse)]


def test_recorded_responses_read_back_equal(harness: Harness) -> None:
    """The retry's third request is given the responses of requests 1 and 2 exactly as attempt 1 had
    them: same parts, timestamps, model name and run id (the run id is the same on every attempt)."""
    run_id = harness.create(graphs.report, {"topic": "oak", "crash": "raise"})
    graphs.SEEN.clear()
    with pytest.raises(RuntimeError):
        harness.attempt(graphs.report, run_id)
    first = graphs.SEEN[1]  # attempt 1's second request: the first response
    harness.attempt(graphs.report, run_id)
    retried = graphs.SEEN[2]  # attempt 2's only request: both recorded responses
    assert len(graphs.SEEN) == 3
    assert responses(retried)[0] == responses(first)[0]
    assert responses(retried)[0].run_id is not None
    assert [r.parts for r in responses(retried)][1] == [TextPart(graphs.DRAFT)]


def test_a_record_that_no_longer_reads_back_is_asked_again(
    harness: Harness, redis_client: redis.Redis
) -> None:
    """A model request's record that does not read back as a ModelResponse (another pydantic-ai
    version wrote it, or Redis was edited) is not used: as durable_call does, the request is made again."""
    run_id = harness.create(graphs.report, {"topic": "elm", "crash": "raise"})
    with pytest.raises(RuntimeError):
        harness.attempt(graphs.report, run_id)
    first_request = next(
        k for k in redis_client.hkeys(keys.memo(run_id)) if k.decode().endswith("|reporter.model|0")
    )
    redis_client.hset(keys.memo(run_id), first_request, json.dumps({"parts": "not parts"}))
    assert harness.attempt(graphs.report, run_id).startswith("report: ")
    assert logged(redis_client, run_id) == ["model:1", "tool:1", "model:1", "model:2", "model:2"]


# -- graphs of single-agent steps, built per test ----------------------------------------------


def one_step(name: str, body: Any) -> GraphAction:
    g = GraphBuilder(name=name, input_type=str, output_type=str)

    @g.step
    async def ask(ctx: StepContext[None, None, str]) -> str:
        return str(await body(ctx.inputs))

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    return GraphAction(g.build(), max_attempts=3)


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])


def test_two_runs_of_one_durable_agent_at_once_in_a_step_are_refused(harness: Harness) -> None:
    """Records are matched by order, which two concurrent runs would not keep on a retry."""

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(0.01)
        return echo(messages, info)

    agent = durable_agent(Agent(FunctionModel(slow), name="twice"))

    async def both(prompt: str) -> str:
        first, second = await asyncio.gather(agent.run(prompt), agent.run(prompt))
        return first.output + second.output

    action = one_step("ai_twice", both)
    with pytest.raises(DurableAgentError, match="run twice at once"):
        harness.attempt(action, harness.create(action, "hi"))


def test_runs_one_after_another_in_a_step_each_replay_their_own_records(harness: Harness) -> None:
    calls: list[int] = []

    def counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        return ModelResponse(parts=[TextPart(f"answer {len(calls)}")])

    agent = durable_agent(Agent(FunctionModel(counted), name="serial"))
    fail = [True]

    async def three(prompt: str) -> str:
        outputs = [(await agent.run(f"{prompt} {i}")).output for i in range(3)]
        if fail.pop() if fail else False:
            raise RuntimeError("after the three runs, on purpose")
        return ",".join(outputs)

    action = one_step("ai_serial", three)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    assert harness.attempt(action, run_id) == "answer 1,answer 2,answer 3"
    assert len(calls) == 3


def test_a_tool_result_that_is_not_json_fails_the_run_for_good_naming_the_call(harness: Harness) -> None:
    def use_tool(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lock", {})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(use_tool), name="locker")

    @agent.tool_plain
    def lock() -> Any:
        return threading.Lock()

    durable = durable_agent(agent)

    async def run(prompt: str) -> str:
        return (await durable.run(prompt)).output

    action = one_step("ai_lock", run)
    with pytest.raises(
        RunFailure, match=r"'locker\.tool\.lock' returned a value that is not JSON"
    ) as failure:
        harness.attempt(action, harness.create(action, "hi"))
    assert failure.value.permanent and failure.value.reason == "not_recordable"


def test_a_toolset_passed_to_a_run_inside_a_step_is_refused(harness: Harness) -> None:
    """Its tools were never wrapped, so they would run unrecorded: pydantic-ai refuses it."""
    durable = durable_agent(Agent(FunctionModel(echo), name="late"))

    async def run(prompt: str) -> str:
        return (await durable.run(prompt, toolsets=[FunctionToolset(id="extra")])).output

    action = one_step("ai_late", run)
    with pytest.raises(UserError, match="cannot be added at runtime with reflexr-graph"):
        harness.attempt(action, harness.create(action, "hi"))


def test_a_streamed_run_is_recorded_and_replayed(harness: Harness, redis_client: redis.Redis) -> None:
    """run_stream inside a step: the stream is consumed inside the durable call and its response
    recorded (``<name>.model.stream``); the retry replays it without asking the model again."""
    streamed: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        streamed.append(1)
        for chunk in ("hel", "lo"):
            yield chunk

    durable = durable_agent(Agent(FunctionModel(echo, stream_function=stream), name="streamer"))
    fail = [True]

    async def run(prompt: str) -> str:
        async with durable.run_stream(prompt) as result:
            text = "".join([chunk async for chunk in result.stream_text(delta=True)])
        if fail.pop() if fail else False:
            raise RuntimeError("after the stream, on purpose")
        return text

    action = one_step("ai_stream", run)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    assert recorded_names(redis_client, run_id) == ["streamer.model.stream"]
    assert harness.attempt(action, run_id) == "hello"
    assert len(streamed) == 1


def test_a_tools_model_retry_and_a_dynamic_toolsets_tools_are_recorded(
    harness: Harness, redis_client: redis.Redis
) -> None:
    """A tool that raises ModelRetry once steers the model as a value, so it is recorded like a
    result; so are a dynamic toolset's tool lists. The retry runs neither the tool nor the toolset."""
    ran: list[str] = []
    tools = FunctionToolset[None]()

    @tools.tool_plain
    def flaky() -> str:
        ran.append("flaky")
        if ran.count("flaky") == 1:
            raise ModelRetry("try again")
        return "fine"

    def toolset(ctx: RunContext[None]) -> FunctionToolset[None]:
        ran.append("toolset")
        return tools

    def call_flaky(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 5:
            return ModelResponse(parts=[ToolCallPart("flaky", {})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(call_flaky), name="dyn", toolsets=[DynamicToolset(toolset, id="box")])
    durable = durable_agent(agent)
    fail = [True]

    async def run(prompt: str) -> str:
        output = (await durable.run(prompt)).output
        if fail.pop() if fail else False:
            raise RuntimeError("after the run, on purpose")
        return output

    action = one_step("ai_dyn", run)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    names = recorded_names(redis_client, run_id)
    assert names.count("dyn.tool.flaky") == 2 and "dyn.toolset.box.tools" in names
    first = list(ran)
    assert harness.attempt(action, run_id) == "done"
    assert ran == first and first.count("flaky") == 2


def test_the_capability_given_to_the_agent_at_construction_records_the_same(
    harness: Harness, redis_client: redis.Redis
) -> None:
    """``Agent(..., capabilities=[StepDurability(name=...)])`` is the same durability without the wrapper."""
    asked: list[int] = []

    def counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(1)
        return ModelResponse(parts=[TextPart(f"answer {len(asked)}")])

    agent = Agent(FunctionModel(counted), name="built", capabilities=[StepDurability(name="built")])
    fail = [True]

    async def run(prompt: str) -> str:
        output = (await agent.run(prompt)).output
        if fail.pop() if fail else False:
            raise RuntimeError("after the run, on purpose")
        return output

    action = one_step("ai_built", run)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    assert recorded_names(redis_client, run_id) == ["built.model"]
    assert harness.attempt(action, run_id) == "answer 1"
    assert len(asked) == 1


def test_a_durable_agent_streams_its_text_and_tool_calls_and_a_retry_repeats_no_recorded_request(
    harness: Harness, redis_client: redis.Redis
) -> None:
    """``durable_agent(agent, stream="agent")``: the model's tool call and its text deltas reach the
    run's stream while it streams. Attempt 1 fails mid-way through the second request's text; the
    retry answers the first from its record (the model is not asked again, nothing is sent again)
    and streams the second again after a restart item of that request."""
    asked: list[int] = []
    fail = [True]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        asked.append(len(messages))
        if len(messages) == 1:
            yield {0: DeltaToolCall(name="lookup", json_args='{"topic": "tea"}', tool_call_id="c1")}
            return
        for i, chunk in enumerate(("The ", "answer ", "is 42")):
            if i == 1 and fail and fail.pop():
                raise RuntimeError("mid-stream, on purpose")
            yield chunk

    agent = Agent(FunctionModel(echo, stream_function=stream), name="talker")

    @agent.tool_plain
    def lookup(topic: str) -> str:
        return f"{topic} facts"

    durable = durable_agent(agent, stream="agent")

    async def run(prompt: str) -> str:
        return (await durable.run(prompt)).output

    action = one_step("ai_talk", run)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError, match="mid-stream"):
        harness.attempt(action, run_id)
    assert harness.attempt(action, run_id) == "The answer is 42"
    assert asked == [1, 3, 3], "the first request was answered from its record"
    items = drive(stream_page(run_id, 0, None, None), harness.store.handle).items
    shown = [(i.call, ("restart", i.value["void_from"]) if i.restart else i.value) for i in items]
    assert {i.topic for i in items if not i.restart} == {"agent"}
    assert shown == [
        ("talker.model.stream#0", {"tool_call": "lookup", "tool_call_id": "c1"}),
        ("talker.model.stream#1", "The "),
        ("talker.model.stream#1", ("restart", 2)),
        ("talker.model.stream#1", "The "),
        ("talker.model.stream#1", "answer "),
        ("talker.model.stream#1", "is 42"),
    ]


def test_a_durable_agents_model_requests_are_retried_in_the_step_under_model_retry(
    harness: Harness,
) -> None:
    """Issue 34: ``durable_agent(agent, model_retry=CallRetry(...))``. The model fails twice, first
    with a 503 that asks for 0.2 s (wrapped by another error: pydantic-ai's model_error_retry_after
    finds it in the chain), then with a plain 503, and answers the third time: one attempt, one
    execution of the step, two ``call_retried`` events, the first waiting what the provider asked."""
    calls: list[int] = []

    def flaky(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the client gave up") from ModelHTTPError(503, "flaky", retry_after=0.2)
        if len(calls) == 2:
            raise ModelHTTPError(503, "flaky")
        return ModelResponse(parts=[TextPart("fine")])

    policy = CallRetry(max_attempts=3, backoff_s=0.05, backoff_max_s=1)
    agent = durable_agent(Agent(FunctionModel(flaky), name="retried"), model_retry=policy)
    steps: list[int] = []

    async def ask(prompt: str) -> str:
        steps.append(1)
        return (await agent.run(prompt)).output

    action = one_step("ai_model_retry", ask)
    run_id = harness.create(action, "hi")
    assert harness.attempt(action, run_id) == "fine"
    assert (len(calls), len(steps), harness.store.get(run_id).attempts) == (3, 1, 1)
    retried = [e.fields for e in harness.store.events(run_id) if e.type == "call_retried"]
    assert [(e["call"], e["try"], e["error_type"]) for e in retried] == [
        ("retried.model", "1", "RuntimeError"),
        ("retried.model", "2", "ModelHTTPError"),
    ]
    assert retried[0]["delay_ms"] == "200" and int(retried[1]["delay_ms"]) <= 100
