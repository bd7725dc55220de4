"""``durable_agent(agent)``: the same agent, its model requests and tool calls recorded inside steps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pydantic_ai.agent import AbstractAgent, AgentRun, EventStreamHandler, WrapperAgent
from pydantic_ai.models import Model
from pydantic_ai.output import OutputDataT
from pydantic_ai.tools import AgentDepsT

from reflexr_graph.ai.capability import StepDurability
from reflexr_graph.ai.step import in_step
from reflexr_graph.core.call_retry import CallRetry
from reflexr_graph.errors import DurableAgentError

if TYPE_CHECKING:
    from pydantic_ai.realtime import RealtimeSession


class DurableAgent(WrapperAgent[AgentDepsT, OutputDataT]):
    """An agent whose runs inside a step record their model requests and tool calls.

    Every way to run it (``run``, ``run_sync``, ``iter``, ``run_stream``, ``run_stream_events``)
    goes through :meth:`iter`, which adds the durability capability to the run. Outside a step
    the agent runs exactly as the one it wraps.
    """

    def __init__(
        self,
        wrapped: AbstractAgent[AgentDepsT, OutputDataT],
        *,
        name: str,
        models: Mapping[str, Model] | None,
        stream: str | None = None,
        model_retry: CallRetry | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.durability = StepDurability[AgentDepsT](
            name=name,
            models=models,
            stream=stream,
            model_retry=model_retry,
            event_stream_handler=event_stream_handler,
        )

    @asynccontextmanager
    async def iter(self, *args: Any, **kwargs: Any) -> AsyncIterator[AgentRun[AgentDepsT, Any]]:
        # Added per run, so the agent the caller built stays as it is; pydantic-ai binds a run's
        # capabilities to the agent before the run, which wraps its toolsets as at construction.
        # First, so that among the innermost capabilities its hooks run before a deferred-call
        # handler's, which the wait's inbox entry needs (ai/events.py).
        capabilities = [self.durability, *(kwargs.pop("capabilities", None) or ())]
        async with self.wrapped.iter(*args, capabilities=capabilities, **kwargs) as run:
            yield run

    # pydantic-ai has no public way for a wrapper to gate realtime sessions: WrapperAgent's own
    # docstring tells wrappers that enforce a policy in iter() to override this private method.
    @asynccontextmanager
    async def _open_realtime_session(self, *args: Any, **kwargs: Any) -> AsyncIterator[RealtimeSession]:
        # A realtime session's model traffic does not go through iter(), so nothing would record it.
        _refuse_realtime_in_step()
        async with super()._open_realtime_session(*args, **kwargs) as session:
            yield session


def _refuse_realtime_in_step() -> None:
    if in_step():
        raise DurableAgentError(
            "a realtime session cannot run inside a step: its model traffic is not recorded, so a retry "
            "would repeat it; run the agent with run() or iter() there"
        )


def durable_agent(
    agent: AbstractAgent[AgentDepsT, OutputDataT],
    *,
    name: str | None = None,
    models: Mapping[str, Model] | None = None,
    stream: str | None = None,
    model_retry: CallRetry | None = None,
    event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
) -> DurableAgent[AgentDepsT, OutputDataT]:
    """The agent, with its model requests and tool calls inside a step recorded as durable calls.

    When the step runs again after a crash or an exception, the calls the agent already made
    return their recorded results in order (the model is not asked again, the tool does not run
    again) and the run continues from the first call not recorded. Tool calls run one after
    another inside a step, so that order is the same on every attempt.

    Args:
        agent: the agent to wrap; it is not changed, and still runs unrecorded where used directly.
        name: the prefix of its durable call names (``<name>.model``, ``<name>.tool.<tool>``);
            defaults to the agent's own ``name``. It must be stable: records are found by it.
        models: models a run may select with ``run(model=...)`` besides the agent's own, by id.
        stream: a topic of the run's stream that gets, inside a step, the model's text token by
            token and the tool calls it makes, while it streams (``Client.stream(run_id,
            topic=...)`` reads them). A request answered from its record sends nothing again.
        model_retry: how a failing model request is tried again inside the step, spending none
            of the run's attempts (``CallRetry``); the wait a provider asks for (pydantic-ai's
            ``model_error_retry_after``) is honoured. None: a failed request fails the step.
        event_stream_handler: pydantic-ai's handler of the run's events, as ``Agent.run`` takes it;
            inside a step, a model request answered from its record sends it no stream events again.

    Raises:
        DurableAgentError: neither ``name`` nor the agent's name is set.
    """
    chosen = name or agent.name
    if not chosen:
        raise DurableAgentError(
            "a durable agent needs a name, the prefix of its durable call names: pass "
            "durable_agent(agent, name=...) or build the agent with Agent(..., name=...)"
        )
    return DurableAgent(
        agent,
        name=chosen,
        models=models,
        stream=stream,
        model_retry=model_retry,
        event_stream_handler=event_stream_handler,
    )
