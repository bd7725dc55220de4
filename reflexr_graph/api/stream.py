"""A run's events as Server-Sent Events, live until the run ends.

The stream sends the history first (or what follows ``Last-Event-ID``), then each new event as
it is written, each with its stream id as the SSE id, and ends with an ``end`` event carrying
the finished run. Between events it blocks in XREAD on the loop; a comment line every
:data:`KEEPALIVE_MS` keeps proxies from closing an idle stream. When the server stops, each
stream ends at once (``stopping``), and an EventSource reconnects with its Last-Event-ID,
to this server once it is back or to another one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from reflexr_graph.api.models import EventOut
from reflexr_graph.client import AsyncClient
from reflexr_graph.model import TERMINAL

KEEPALIVE_MS = 15_000
MEDIA_TYPE = "text/event-stream"


def frame(event: str, data: str, event_id: str | None = None) -> str:
    """One SSE frame (``data`` is one line of JSON)."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


async def run_stream(
    client: AsyncClient, run_id: str, after: str, stopping: asyncio.Event
) -> AsyncIterator[str]:
    """SSE frames of ``run_id``'s events after stream id ``after``, until the run is terminal or
    ``stopping`` is set."""
    last = after
    while not stopping.is_set():
        for event in await client.events(run_id, after=last):
            last = event.id
            yield frame(event.type, EventOut.of(event).model_dump_json(), event.id)
        info = await client.get(run_id)
        if info.status in TERMINAL:
            # The run may have ended after the read above: its last events (run_succeeded...)
            # were written with the status, so they are read again before the stream ends.
            for event in await client.events(run_id, after=last):
                yield frame(event.type, EventOut.of(event).model_dump_json(), event.id)
            yield frame("end", info.model_dump_json())
            return
        # Events land before the status they lead to is read back: block only when none is new.
        blocked = client.events(run_id, after=last, block_ms=KEEPALIVE_MS)
        if not await _unless_stopping(blocked, stopping):
            yield ": keep-alive\n\n"


async def _unless_stopping(blocked: Any, stopping: asyncio.Event) -> Any:
    """What ``blocked`` returns, or None as soon as ``stopping`` is set (the read is cancelled)."""
    read = asyncio.ensure_future(blocked)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (read, stop):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return read.result() if not read.cancelled() else None


async def item_stream(
    client: AsyncClient, run_id: str, topic: str | None, after: int, stopping: asyncio.Event
) -> AsyncIterator[str]:
    """SSE frames of the items ``run_id``'s steps emitted after offset ``after`` (``item``, or
    ``restart`` for a restart item; the offset is the SSE id), until the run has ended (an ``end``
    event with the finished run) or ``stopping`` is set."""
    while not stopping.is_set():
        page = await _unless_stopping(
            client.stream_page(run_id, after=after, block_ms=KEEPALIVE_MS), stopping
        )
        if page is None:
            return
        for item in page.items:
            after = item.offset
            if topic is None or item.restart or item.topic == topic:
                yield frame("restart" if item.restart else "item", item.model_dump_json(), str(item.offset))
        if page.ended:
            yield frame("end", (await client.get(run_id)).model_dump_json())
            return
        if not page.items:
            yield ": keep-alive\n\n"


def last_offset(header: str | None) -> int:
    """Where a reconnecting EventSource resumes a run's item stream: after its Last-Event-ID offset."""
    return int(header) if header and header.isdigit() else 0


def last_event_id(header: str | None) -> str:
    """Where a reconnecting EventSource resumes: its Last-Event-ID when that is a stream id."""
    if header and all(part.isdigit() for part in header.split("-", 1)):
        return header
    return "0-0"
