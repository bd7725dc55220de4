"""``StepDurability``: the pydantic-ai durability capability whose durable units are durable calls.

pydantic-ai's durability base does the work an engine shares with every other (wrapping the
agent's toolsets, routing each model request through a durable model, carrying tool errors that
steer the model as values); this capability says what a reflexr-graph engine is: a running step
is the durable container and each ``durable_call`` is a unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    conversation_id_from_run_id,
    replay_scope,
)
from pydantic_ai.external_events import external_event_scope
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, DeferredToolRequests, DeferredToolResults, RunContext

from reflexr_graph.ai.backend import DurableCallBackend, unstorable
from reflexr_graph.ai.events import StepEventWaiter, note_requests
from reflexr_graph.ai.step import in_step, one_run_at_a_time, stable_run_id
from reflexr_graph.ai.streaming import emitting_handler
from reflexr_graph.core.call_retry import CallRetry
from reflexr_graph.core.emit import check_topic, in_durable_call
from reflexr_graph.core.waits import sleep
from reflexr_graph.errors import Suspended


@dataclass(init=False, kw_only=True)
class StepDurability(BaseDurabilityCapability[AgentDepsT]):
    """Records an agent's model requests and tool calls inside a step, and replays them on retry.

    ``durable_agent(agent)`` adds it to each run of an agent built elsewhere; an agent you build
    can take it directly, ``Agent(..., capabilities=[StepDurability(name="reporter")])``. Outside
    a running step it changes nothing: the agent runs as it would without it.

    Args:
        name: the prefix of the agent's durable call names; stable, since records are found by it.
        models: models a run may select with ``run(model=...)`` besides the agent's own, by id.
        stream: a topic of the run's stream (``reflexr_graph.emit``) that gets the model's text,
            token by token, and the tool calls it makes, while it streams (ai/streaming.py); None
            for none.
        event_stream_handler: pydantic-ai's handler of the run's events: inside a step, the model's
            stream events reach it live from inside the model request's durable call (so a request
            answered from its record sends none again), and the others as the run goes.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="reflexr-graph",
        durable_unit_noun="durable call",
        durable_container_noun="step",
        # durable_call records JSON, so results are reduced to JSON inside the call.
        codec=JSON_CODEC,
        serialization_failure=unstorable,
        # Records are matched by name and order: tool calls run in parallel could finish, and
        # so call durable_call, in another order on the retry.
        sequential_tools_in_durable_context=True,
        # A toolset passed to run() was never wrapped, so its tools would run unrecorded.
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        # Durable calls run in the step's own process and task, so a run can hold one MCP
        # session that its first call opens; function toolsets are entered around the run as
        # without durability, and a dynamic toolset is resolved inside its own calls.
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        tool_config_key=None,
        # A wait (an external event's, a durable sleep: reflexr_graph.sleep) ends the attempt by
        # raising Suspended; the step runs again once it is answered or due, its recorded calls
        # answered in order.
        control_flow_error_types=(Suspended,),
    )

    def __init__(
        self,
        *,
        name: str,
        models: Mapping[str, Model] | None = None,
        stream: str | None = None,
        model_retry: CallRetry | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
    ) -> None:
        super().__init__(name=name, models=models, event_stream_handler=event_stream_handler)
        self.stream_topic = None if stream is None else check_topic(stream)
        self.model_retry = model_retry

    @property
    def has_wrap_run_event_stream(self) -> bool:
        # A topic is a reason to stream the model's requests, inside a step: that is where it goes.
        return super().has_wrap_run_event_stream or (
            self.stream_topic is not None and self.in_durable_context
        )

    # pydantic-ai offers no public hook for the handler of the live model stream inside a model
    # request's durable unit: its own engines (Temporal, Hatchet) override this private method, as
    # its docstring tells engines to. Kept until pydantic-ai makes it public.
    def _model_stream_event_handler(self) -> EventStreamHandler[AgentDepsT] | None:
        # Inside the model request's durable call, where the live stream is: readers get the tokens
        # while the model streams them, not once its response is recorded.
        handler = super()._model_stream_event_handler()
        if self.stream_topic is None or not self.in_durable_context:
            return handler
        return emitting_handler(self.stream_topic, handler)

    @property
    def in_durable_context(self) -> bool:
        return in_step()

    @property
    def in_durable_unit(self) -> bool:
        # A user's own durable_call around a tool's work is a unit too: its result is recorded.
        return super().in_durable_unit or (in_step() and in_durable_call())

    async def durable_sleep(self, seconds: float) -> None:
        # The agent graph's wait between polls of a model's server-side job: a durable timer, so the
        # run waits holding no worker, and a run woken after it does not wait through it again.
        await sleep(max(seconds, 0.0))

    def get_default_run_id(self) -> str | None:
        # The same run id on every attempt, so the messages of a retried run carry the ids the
        # recorded ones were made with.
        return stable_run_id(self.name)

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    def get_durable_operation_backend(self) -> DurableCallBackend:
        return DurableCallBackend(self.name, self.model_retry)

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        if not self.in_durable_context:
            return await super().wrap_run(ctx, handler=handler)
        # The backend reports each durable call as run or answered from its record
        # (record_durable_unit): spans and token and cost metrics of replayed work are not emitted.
        # The event waiter is installed before the base's wrap_run, which keeps a waiter already installed.
        with (
            one_run_at_a_time(self.name),
            replay_scope(),
            external_event_scope(StepEventWaiter(self.name)),
        ):
            return await super().wrap_run(ctx, handler=handler)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[AgentDepsT], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        # Answers nothing: it notes the calls, so that a wait a handler after it starts for them
        # shows them in the inbox (ai/events.py).
        if self.in_durable_context:
            note_requests(requests)
        return await super().handle_deferred_tool_calls(ctx, requests=requests)
