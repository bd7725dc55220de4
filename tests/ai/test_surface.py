"""reflexr_graph.ai as users meet it: the optional extra, names, and the agent outside a step."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import typing
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.durable_exec import DurableOperationId
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction, ReflexrError
from reflexr_graph.ai import DurableAgent, durable_agent
from reflexr_graph.ai.names import CallNames
from reflexr_graph.errors import DurableAgentError, ExtraNotInstalled
from tests.core.harness import Harness

pytestmark = pytest.mark.timeout(60)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_reflexr_graph_does_not_load_pydantic_ai() -> None:
    out = run_python("import sys, reflexr_graph, reflexr_graph.client; print('pydantic_ai' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_without_the_extra_the_module_says_what_to_install() -> None:
    """An ExtraNotInstalled, which is a ReflexrError and an ImportError, naming the extra."""
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"  # what an interpreter without it sees
        "from reflexr_graph.errors import ExtraNotInstalled\n"
        "try:\n    import reflexr_graph.ai\n"
        "except ExtraNotInstalled as e:\n    print(isinstance(e, ImportError), e)\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("True ") and "pip install 'reflexr-graph[ai]'" in out.stdout
    assert issubclass(ExtraNotInstalled, ReflexrError)


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("double", {"x": 21})])
    return ModelResponse(parts=[TextPart(f"{messages[-1].parts[0].content}")])


def test_outside_a_step_the_durable_agent_is_the_agent() -> None:
    """No step, nothing recorded and nothing refused: the run is the wrapped agent's, tools and all."""
    agent = Agent(FunctionModel(answer), name="doubler")

    @agent.tool_plain
    def double(x: int) -> int:
        return 2 * x

    durable = durable_agent(agent)
    assert isinstance(durable, DurableAgent) and durable.wrapped is agent and durable.name == "doubler"
    assert asyncio.run(durable.run("go")).output == "42"
    assert asyncio.run(agent.run("go")).output == "42"


def test_a_durable_agent_needs_a_stable_name() -> None:
    with pytest.raises(DurableAgentError, match=r"durable_agent\(agent, name=\.\.\.\)"):
        durable_agent(Agent(FunctionModel(answer)))
    assert durable_agent(Agent(FunctionModel(answer)), name="given").durability.name == "given"


def test_a_realtime_session_is_refused_inside_a_step(harness: Harness) -> None:
    """Its model traffic does not go through a run, so nothing would record it."""
    durable = durable_agent(Agent(FunctionModel(answer), name="talker"))
    g = GraphBuilder(name="ai_talk", input_type=str, output_type=str)

    @g.step
    async def talk(ctx: StepContext[None, None, str]) -> str:
        async with durable.realtime("openai:gpt-realtime").session():
            return "talked"

    g.add(g.edge_from(g.start_node).to(talk), g.edge_from(talk).to(g.end_node))
    action = GraphAction(g.build())
    with pytest.raises(DurableAgentError, match="realtime session cannot run inside a step"):
        harness.attempt(action, harness.create(action, "hi"))


# Every operation kind pydantic-ai's durable_exec defines, with the record name each gets. These
# names are persisted data (records are found again by name), so the set is pinned: a pydantic-ai
# release that adds a kind fails here until it is given a deliberate name in ai/names.py.
PINNED_OPERATION_NAMES = {
    "ModelRequestId": "a.model",
    "ModelCompactMessagesId": "a.model.compact",
    "ModelCountTokensId": "a.model.count_tokens",
    "ModelCancelSuspendedResponseId": "a.model.cancel",
    "CapabilityOperationId": "a.capability.cap.op",
    "EventStreamHandlerId": "a.event",
    "ToolsetGetToolsId": "a.toolset.box.tools",
    "ToolsetGetInstructionsId": "a.toolset.box.instructions",
    "ToolsetValidateToolArgumentsId": "a.tool.validate",
    "ToolsetCallToolId": "a.tool",
}


def _an_operation(kind: type[Any]) -> Any:
    """One instance of an operation id, its required fields given plain values."""
    values = {"model_name": "m", "streaming": False, "capability_id": "cap", "operation": "op"}
    values |= {"toolset_id": "box", "toolset_kind": "function"}
    return kind(**{f.name: values[f.name] for f in dataclasses.fields(kind) if f.name in values})


def test_every_durable_operation_kind_has_a_deliberate_name() -> None:
    kinds = typing.get_args(DurableOperationId)
    assert {k.__name__ for k in kinds} == set(PINNED_OPERATION_NAMES), (
        "pydantic-ai's DurableOperationId changed: name each new kind in reflexr_graph/ai/names.py "
        "and pin it here (the names are stored with every run's records)"
    )
    names = CallNames("a")
    assert {k.__name__: names.operation_name(_an_operation(k)) for k in kinds} == PINNED_OPERATION_NAMES
