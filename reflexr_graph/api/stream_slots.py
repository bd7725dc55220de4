"""How many event streams a server holds open: at most ``REFLEXR_MAX_STREAMS``, and a share of
them per token, so that streams cannot starve the other routes.

An event stream (``/api/runs/{id}/events`` as SSE, ``/api/runs/{id}/stream``) holds a Redis
connection for as long as it is open. The streams read on a client of their own
(``app.state.streams``), whose pool is as large as the cap, so the pool of every other route
is never theirs; past the cap, a stream is answered 429 with ``Retry-After`` before it holds
anything. A stream gives its slot back when it ends, and when its client goes away, which is
watched for rather than found at the next write (up to a keep-alive later).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import Request
from starlette.exceptions import HTTPException
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from reflexr_graph.api.stream import MEDIA_TYPE
from reflexr_graph.client import AsyncClient

RETRY_AFTER_S = 5
"""What a stream refused for the cap is told to wait (an EventSource retries after it)."""


def share_of(cap: int, tokens: int) -> int:
    """The streams one token may hold: all of them when the server has one token, else half, so
    that one token's streams leave room for the others'."""
    return cap if tokens <= 1 else max(1, cap // 2)


class StreamSlots:
    """Counts open streams, in all (at most ``cap``) and per token (at most ``share``)."""

    def __init__(self, cap: int, share: int) -> None:
        self.cap = cap
        self.share = share
        self._held: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._held.total()

    def take(self, holder: str) -> bool:
        """Take a slot for ``holder``'s stream; False when the cap or its share is reached."""
        if self.open >= self.cap or self._held[holder] >= self.share:
            return False
        self._held[holder] += 1
        return True

    def give_back(self, holder: str) -> None:
        self._held[holder] -= 1
        if self._held[holder] <= 0:
            del self._held[holder]


class HeldStream(StreamingResponse):
    """A streaming response that ends when its client goes away and then gives its slot back."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None], **options: Any) -> None:
        super().__init__(content, **options)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        failed: Exception | None = None
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    nonlocal failed
                    try:
                        await self.stream_response(send)
                    except Exception as exc:
                        failed = exc  # raised as itself below, not inside an ExceptionGroup
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            self._release()
        if failed is not None:
            raise failed


def open_stream(request: Request, frames: Callable[[AsyncClient], AsyncIterator[str]]) -> StreamingResponse:
    """``frames`` read on the streams' own client, as SSE, in a slot of the cap; 429 with
    Retry-After when none is free for the request's token."""
    slots: StreamSlots = request.app.state.stream_slots
    holder = getattr(request.state, "token_holder", "")
    if not slots.take(holder):
        raise HTTPException(
            429,
            f"this server holds as many event streams as it may ({slots.cap}, REFLEXR_MAX_STREAMS; "
            f"{slots.share} per token): try again later, or close a stream you no longer read",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            slots.give_back(holder)

    try:
        content = frames(request.app.state.streams)
    except BaseException:
        release()
        raise
    return HeldStream(content, release, media_type=MEDIA_TYPE, headers={"X-Accel-Buffering": "no"})
