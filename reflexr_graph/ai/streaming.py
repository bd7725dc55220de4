"""A durable agent's model stream, emitted to the run's stream (``durable_agent(agent, stream=topic)``).

The handler runs inside each model request's durable call, where the live stream is, so the text
reaches readers token by token while the model streams: a text part's content and each text delta
as text, and each tool call the model starts as ``{"tool_call": name, "tool_call_id": id}``. The
items belong to that call (``StreamItem.call``), so a retry that answers the request from its record
neither asks the model again nor voids them; a request that did not finish streams again after a
restart item of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import (
    AgentStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
)
from pydantic_ai.tools import RunContext

from reflexr_graph.core.emit import emit


def item_of(event: AgentStreamEvent) -> Any:
    """What an event of the model's stream puts in the run's stream; None for nothing."""
    if isinstance(event, PartStartEvent):
        if isinstance(event.part, TextPart):
            return event.part.content or None
        if isinstance(event.part, ToolCallPart):
            return {"tool_call": event.part.tool_name, "tool_call_id": event.part.tool_call_id}
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta or None
    return None


def emitting_handler(topic: str, handler: EventStreamHandler[Any] | None) -> EventStreamHandler[Any]:
    """An event stream handler that emits the model's text and tool calls to ``topic``, then hands
    each event on to ``handler`` (if any), which sees the stream it would have seen on its own."""

    async def emitting(ctx: RunContext[Any], stream: AsyncIterable[AgentStreamEvent]) -> None:
        async def tee() -> AsyncIterator[AgentStreamEvent]:
            async for event in stream:
                item = item_of(event)
                if item is not None:
                    await emit(item, topic=topic)
                yield event

        if handler is None:
            async for _ in tee():
                pass
        else:
            await handler(ctx, tee())

    return emitting
