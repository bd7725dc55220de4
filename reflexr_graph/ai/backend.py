"""Each operation of an agent's run, a model request or a tool call, as one ``durable_call``.

pydantic-ai's durability base reduces each operation's result to JSON (its JSON codec) inside
the call, and reads it back through the operation's own type (``ModelResponse``, a tool call's
result) after it, so the first attempt and a retry that replays the record see the same value.
The durable call records that JSON through a type that also checks it reads back as the
operation's type: ``durable_call``'s own read-back rule then applies as to any other call. A
result that does not fails the run when it is recorded, and a record that no longer does (one
written by another pydantic-ai version) is not used: the call is made again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, JsonValue
from pydantic_ai.durable_exec import (
    BoundDurableOperation,
    CallableOperationBackend,
    DurableOperation,
    DurableOperationId,
    ResultCodec,
    RoleBasedOperationConfig,
    model_error_retry_after,
    record_durable_unit,
)

from reflexr_graph.ai.names import CallNames
from reflexr_graph.core.call_retry import CallRetry
from reflexr_graph.core.context import current_run_or_none
from reflexr_graph.core.durable import recorded_call
from reflexr_graph.errors import Kind, ReflexrError, RunFailure

ParamsT = TypeVar("ParamsT")
WireT = TypeVar("WireT")
ResultT = TypeVar("ResultT")

NOT_JSON = "not_recordable"
"""The reason of a run failed by a result that cannot be reduced to JSON, as durable_call's own."""

_recorded_types: dict[tuple[str, DurableOperationId], Any] = {}
"""(agent, operation) -> the type its durable calls record through. pydantic-ai binds model
operations again for every request; building the type (and durable_call's adapter of it) once
per operation keeps that cheap."""


class UnstorableResult(ReflexrError):
    """A result that pydantic-ai's JSON codec cannot reduce to JSON; the backend names the call."""

    error_kind = Kind.INVALID


def recorded_type(codec: ResultCodec[Any]) -> Any:
    """JSON that reads back through ``codec``: what an operation's durable calls record."""

    def reads_back(payload: JsonValue) -> JsonValue:
        codec.load(payload)  # raises (a ValidationError) when it does not
        return payload

    return Annotated[JsonValue, AfterValidator(reads_back)]


def _model_retry_after(error: BaseException) -> float | None:
    """The wait a model error asks for (a provider's Retry-After), wherever it is in the chain.
    Uncapped here: CallRetry hands a wait past its backoff_max_s to the run's own retry."""
    return model_error_retry_after(error, maximum=float("inf"))


class DurableCallBackend(CallableOperationBackend[CallRetry | None]):
    """Runs each operation as ``durable_call(name, operation)``.

    An operation's configuration is the ``CallRetry`` its calls are tried again under: the model
    requests' is ``durable_agent(..., model_retry=...)``, and the other operations have none (a
    failed call fails the step, and the step's attempt is retried).
    """

    def __init__(self, agent_name: str, model_retry: CallRetry | None = None) -> None:
        config = RoleBasedOperationConfig[CallRetry | None](
            model=model_retry, event=None, capability=None, tool=None
        )
        super().__init__(namer=CallNames(agent_name), config=config)
        self.agent_name = agent_name

    def bind(
        self, operation: DurableOperation[ParamsT, WireT, ResultT]
    ) -> BoundDurableOperation[ParamsT, WireT, ResultT]:
        key = (self.agent_name, operation.operation_id)
        if key not in _recorded_types:
            _recorded_types[key] = recorded_type(operation.result_codec)
        return super().bind(operation)

    def execution_attempt(self) -> int:
        # The run's attempt: a unit runs again only when the step does, on the run's next attempt.
        run = current_run_or_none()
        return run.attempt if run is not None else 1

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: CallRetry | None,
    ) -> object:
        ran = False

        async def operation() -> object:
            nonlocal ran
            ran = True
            try:
                return await body()
            except UnstorableResult:
                raise RunFailure(
                    f"durable_call {name!r} returned a value that is not JSON, so it cannot be recorded: "
                    "return JSON types, pydantic models or dataclasses from the agent's tools",
                    reason=NOT_JSON,
                    permanent=True,
                ) from None

        result: object = await recorded_call(
            name,
            operation,
            result_type=_recorded_types[(self.agent_name, operation_id)],
            retry=config,
            retry_after=_model_retry_after,
        )
        # In the task that asked for the unit, so it is credited to the spans it ran under.
        record_durable_unit(executed=ran)
        return result


def unstorable(error: Exception) -> BaseException:
    """pydantic-ai's hook for a result its JSON codec cannot encode, which no retry can fix."""
    return UnstorableResult(type(error).__name__)
