"""Issue 35 item 5: the rest of pydantic-ai's durable backend contract, on real attempts (the
driver, the journal, real Redis) of steps that run agents on pydantic-ai's FunctionModel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from reflexr_graph import current_run, durable_call
from reflexr_graph.ai import StepDurability, durable_agent
from reflexr_graph.errors import Suspended
from reflexr_graph.model import Status
from tests.ai.test_in_step import one_step
from tests.core.harness import Harness

pytestmark = pytest.mark.timeout(60)


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])


async def streamed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for chunk in ("ans", "wer 1"):
        yield chunk


def test_durable_agent_and_step_durability_take_an_event_stream_handler(harness: Harness) -> None:
    seen: list[str] = []

    async def handler(ctx: RunContext[Any], events: Any) -> None:
        async for event in events:
            seen.append(type(event).__name__)

    agent = durable_agent(
        Agent(FunctionModel(answer, stream_function=streamed), name="told"), event_stream_handler=handler
    )
    StepDurability[None](name="also_told", event_stream_handler=handler)  # a TypeError before

    async def body(prompt: str) -> str:
        return (await agent.run(prompt)).output

    action = one_step("ai_told", body)
    assert harness.attempt(action, harness.create(action, "hi")) == "answer 1"
    assert seen, "the handler was given no event of the run in the step"


def test_execution_attempt_is_the_runs_attempt(harness: Harness) -> None:
    agent = durable_agent(Agent(FunctionModel(answer), name="counting"))
    backend = agent.durability.get_durable_operation_backend()
    attempts: list[tuple[int, int]] = []

    async def body(prompt: str) -> str:
        attempts.append((backend.execution_attempt(), current_run().attempt))
        if len(attempts) == 1:
            raise RuntimeError("the first attempt fails, on purpose")
        return "ok"

    action = one_step("ai_attempt", body)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    harness.attempt(action, run_id)
    assert attempts == [(1, 1), (2, 2)]


def test_a_retry_emits_no_second_span_or_token_metric_for_a_replayed_model_request(harness: Harness) -> None:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    settings = InstrumentationSettings(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    agent = durable_agent(
        Agent(FunctionModel(answer), name="traced", capabilities=[Instrumentation(settings=settings)])
    )
    fail = [True]

    async def body(prompt: str) -> str:
        output = (await agent.run(prompt)).output
        if fail.pop() if fail else False:
            raise RuntimeError("after the model answered, on purpose")
        return output

    action = one_step("ai_traced", body)
    run_id = harness.create(action, "hi")
    with pytest.raises(RuntimeError):
        harness.attempt(action, run_id)
    assert harness.attempt(action, run_id) == "answer 1"
    requests = [s.name for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(requests) == 1, f"model request spans: {requests}"
    assert token_points(reader) == 1


def token_points(reader: InMemoryMetricReader) -> int:
    """How many model requests recorded their token usage (the histogram's input-token count)."""
    data = reader.get_metrics_data()
    count = 0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "gen_ai.client.token.usage":
                    points = metric.data.data_points
                    count += sum(
                        p.count for p in points if (p.attributes or {}).get("gen_ai.token.type") == "input"
                    )
    return count


def test_durable_sleep_suspends_the_run_on_a_durable_timer(harness: Harness) -> None:
    agent = durable_agent(Agent(FunctionModel(answer), name="poller"))

    async def body(prompt: str) -> str:
        await agent.durability.durable_sleep(30)
        return "woke"

    action = one_step("ai_poll", body)
    run_id = harness.create(action, "hi")
    with pytest.raises(Suspended):
        harness.attempt(action, run_id)
    info = harness.store.get(run_id)
    assert info.status is Status.WAITING and info.wake_at is not None
    assert Suspended in agent.durability.engine_spec.control_flow_error_types


def test_in_durable_unit_sees_a_users_own_durable_call(harness: Harness) -> None:
    agent = durable_agent(Agent(FunctionModel(answer), name="unit"))
    seen: list[bool] = []

    async def inside() -> str:
        seen.append(agent.durability.in_durable_unit)
        return "x"

    async def body(prompt: str) -> str:
        seen.append(agent.durability.in_durable_unit)
        return await durable_call("mine", inside)

    action = one_step("ai_unit", body)
    harness.attempt(action, harness.create(action, "hi"))
    assert seen == [False, True]
