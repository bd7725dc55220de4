"""Reading a run's stream live: one cursor, driven by ``Client.stream`` and ``AsyncClient.stream`` alike."""

from __future__ import annotations

import time
from dataclasses import dataclass

from reflexr_graph import errors
from reflexr_graph.core.emit import check_topic
from reflexr_graph.model import StreamItem, StreamPage
from reflexr_graph.store.ops import Op
from reflexr_graph.store.streams import stream_page


@dataclass
class StreamCursor:
    """Where a reader of a run's stream stands: the last offset read, the topic kept, the deadline."""

    run_id: str
    topic: str | None
    after: int
    deadline: float | None
    timeout: float | None
    chunk_limit: int | None
    done: bool = False

    @classmethod
    def start(
        cls,
        run_id: str,
        topic: str | None,
        after: int | None,
        timeout: float | None,
        chunk_limit: int | None,
    ) -> StreamCursor:
        if topic is not None:
            try:
                check_topic(topic)
            except ValueError as exc:
                raise errors.InvalidInputs(
                    f"topic: {exc}", [{"loc": ["topic"], "msg": str(exc), "type": "topic"}]
                ) from None
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise errors.InvalidInputs(
                "after: an offset of the stream (an integer >= 0)",
                [{"loc": ["after"], "msg": "is not an offset >= 0", "type": "offset"}],
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        return cls(run_id, topic, after or 0, deadline, timeout, chunk_limit)

    def read(self) -> Op[StreamPage]:
        """The next read: it blocks until an item comes, the run ends, or the deadline passes."""
        block_ms = 0
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise errors.WaitTimeout(
                    f"run {self.run_id} did not end within {self.timeout:g}s; its stream goes on (read on "
                    f"after offset {self.after})"
                )
            block_ms = max(1, int(remaining * 1000))
        return stream_page(self.run_id, self.after, block_ms, self.chunk_limit)

    def take(self, page: StreamPage) -> list[StreamItem]:
        """The items of ``page`` the reader asked for (restart items whatever the topic)."""
        if page.items:
            self.after = page.items[-1].offset
        self.done = page.ended
        return [i for i in page.items if self.topic is None or i.restart or i.topic == self.topic]
