"""The durable call names of an agent's operations.

A step's recorded calls are found again by name and by how many times the name was called, so
these names are persisted data: renaming one strands the records of every run in flight. They
are prefixed by the agent's name, so two agents in one step never read each other's records.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic_ai.durable_exec import (
    CapabilityOperationId,
    DurableOperationId,
    DurableOperationNamer,
    EventStreamHandlerId,
    JournalOperationNamer,
    ModelCancelSuspendedResponseId,
    ModelCompactMessagesId,
    ModelCountTokensId,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)

if TYPE_CHECKING:
    # The namer protocol returns this type, and pydantic-ai exports no public name for it: it is
    # only named for the type checker. At run time the names are made from the public
    # JournalOperationNamer's (dataclasses.replace), never from this private module.
    from pydantic_ai.durable_exec._operation_names import DurableInvocationName


_NAMED: dict[type, str] = {
    ModelRequestId: "model",
    ModelCompactMessagesId: "model.compact",
    ModelCancelSuspendedResponseId: "model.cancel",
    ModelCountTokensId: "model.count_tokens",
    EventStreamHandlerId: "event",
    ToolsetValidateToolArgumentsId: "tool.validate",
    ToolsetCallToolId: "tool",
}
"""The name after ``<agent>.`` of each operation kind whose name takes nothing from the operation
(operation_name names the others from their fields)."""


class CallNames(JournalOperationNamer, DurableOperationNamer):
    """``<agent>.model`` for model requests, ``<agent>.tool.<tool name>`` for tool calls, and so on.

    Model requests are not told apart by model: a run that falls back to another model, or is
    given one, keeps the order of its requests, which is what the records follow.
    """

    def __init__(self, agent_name: str) -> None:
        super().__init__(agent_name)
        self.agent_name = agent_name

    def operation_name(self, operation_id: DurableOperationId) -> str:
        agent = self.agent_name
        match operation_id:
            case ModelRequestId(streaming=True):
                return f"{agent}.model.stream"
            case CapabilityOperationId(capability_id=capability, operation=operation):
                return f"{agent}.capability.{capability}.{operation}"
            case ToolsetGetToolsId(toolset_id=toolset):
                return f"{agent}.toolset.{toolset}.tools"
            case ToolsetGetInstructionsId(toolset_id=toolset):
                return f"{agent}.toolset.{toolset}.instructions"
        # pydantic-ai adds operation kinds in minor releases; a new one still gets a stable name, and
        # tests/ai/test_surface.py fails on it until it is named here on purpose.
        kind = _NAMED.get(type(operation_id), type(operation_id).__name__)
        return f"{agent}.{kind}"

    def invocation_name(
        self, operation_id: DurableOperationId, *, label: str | None
    ) -> DurableInvocationName:
        # Tool operations are labelled with the tool's name; tool names are unique within an agent.
        match operation_id, label:
            case ToolsetCallToolId(), str():
                name = f"{self.agent_name}.tool.{label}"
            case ToolsetValidateToolArgumentsId(), str():
                name = f"{self.agent_name}.tool.{label}.validate"
            case _:
                name = self.operation_name(operation_id)
        # JournalOperationNamer's, renamed: the only public way to make one (see the import above).
        journal = super().invocation_name(operation_id, label=label)
        return replace(journal, operation_name=name, display_name=None)
