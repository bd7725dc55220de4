"""``emit``: a step streams what it produces (tokens, progress) while the run goes on.

Each item goes into the run's stream in Redis (store/lua/emit.lua), kept with the run for its
retention, with its offset, topic, attempt and node. Writes are batched without a timer: a lone
item (one after a pause of :data:`BURST_S`) is written at once, by the step's own thread, so it
reaches a reader one round trip later; the items of a burst go to a writer thread, which takes
those emitted while a write is in flight together, up to :data:`BATCH` per round trip, so a step
that emits thousands of items a second pays a round trip per batch and goes on meanwhile, even if
it then blocks its loop.

**Crashes.** A step's items are written before the step returns to the graph (:meth:`Emitter.flush`,
called by the step wrapper), so before the checkpoint after it: the items of a step that finished
before the checkpoint a retry resumes from are in the stream, and that step never runs again. A
step that runs again (a crash, a failure, a boundary that could not be saved) emits again. Items are
scoped by node, branch and durable call ('' outside one): the first item of a scope since the
latest checkpoint is noted in the run's memo (``s|<node>|<branch>|<call>`` = its offset), which
the claim hands the next attempt; that attempt's first item of the same scope is preceded by a
*restart* item whose value is ``{"void_from": offset}``: the items of that scope from that offset
on came from an attempt that did not finish it. The next checkpoint drops the memo, as it does
records. A branch answered from its record, and a durable call answered from its, do not run, so
they emit nothing again, and their items from the attempt that recorded them stand: no restart
item names their scope.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from reflexr_graph.core.attempt_scope import AttemptScope
from reflexr_graph.core.context import bound
from reflexr_graph.core.port import AttemptContext, Emission, StreamPort
from reflexr_graph.core.steps import StepExecution, require_execution
from reflexr_graph.errors import NotInRun, RunFailure

BATCH = 64
"""The most items one write carries."""
BURST_S = 0.002
"""An item added this soon after the one before is part of a burst: a writer thread takes it, and
the step goes on. One after a pause is written at once, on the step's own thread."""
TOPIC = re.compile(r"[A-Za-z0-9_.:/@-]{1,64}")
"""A topic: 1 to 64 of these characters (shown to readers and in URLs)."""
MARK = "s|"
"""The prefix of the memo fields that note where a node and branch began emitting since the
latest checkpoint."""


def check_topic(topic: object) -> str:
    """``topic`` when it is a valid topic name, else ValueError (never echoing it)."""
    if not isinstance(topic, str) or not TOPIC.fullmatch(topic):
        raise ValueError("a stream topic is 1 to 64 of the characters A-Z a-z 0-9 _ . : / @ -")
    return topic


def value_json(value: Any, *, topic: str, node: str) -> str:
    """``value`` as compact JSON, by the rules inputs follow (a model or dataclass is dumped)."""
    try:
        return json.dumps(to_jsonable_python(value), allow_nan=False, separators=(",", ":"))
    except Exception:  # a type pydantic cannot dump, NaN or Infinity
        raise RunFailure(
            f"emit(topic={topic!r}) in step {node!r} was given a value that is not JSON "
            f"({type(value).__name__}, or NaN/Infinity); emit JSON data, a pydantic model or a dataclass",
            reason="not_serializable",
            permanent=True,
        ) from None


def _branch(execution: StepExecution) -> str:
    return execution.branch if execution.branch is not None else "?"


_call: ContextVar[str] = ContextVar("reflexr_emit_call", default="")
"""The durable call running in this context (``name#n``), '' outside one."""


def in_call(scope: str) -> AbstractContextManager[None]:
    """Items emitted meanwhile belong to the durable call ``scope``: a retry that answers the call
    from its record does not run it, so they are never voided by a restart of the step."""
    return bound(_call, scope)


def in_durable_call() -> bool:
    """Whether this code runs inside a ``durable_call`` (the agent's own, or a user's)."""
    return _call.get() != ""


def _mark(execution: StepExecution, call: str) -> str:
    """The memo field that notes where the items of a node, branch and call since the checkpoint begin."""
    return f"{MARK}{execution.node_id}|{_branch(execution)}|{call}"


_executor: tuple[int, ThreadPoolExecutor] | None = None


def _writer() -> ThreadPoolExecutor:
    """This process's writer threads (a pool child gets its own: threads do not survive a fork)."""
    global _executor
    if _executor is None or _executor[0] != os.getpid():
        _executor = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="reflexr-emit"))
    return _executor[1]


@dataclass(eq=False)
class Emitter:
    """The items of one attempt on their way to the run's stream, written a batch at a time.

    A lone item is written at once; a writer thread takes the batches of a burst, started by the
    emit that finds none running, so an item goes out even when the step then blocks its event
    loop in synchronous code.
    """

    port: StreamPort
    ctx: AttemptContext
    earlier: dict[str, int]
    """Memo field -> offset: where each node, branch and durable call began emitting, since the
    checkpoint this attempt resumed from, in attempts before this one (the claim brought them)."""
    seen: set[str] = field(default_factory=set)
    """The memo fields this attempt has emitted under since its latest checkpoint."""
    pending: list[Emission] = field(default_factory=list)
    last_offset: int = -1
    failure: BaseException | None = None
    _drain: Future[None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_add: float = -1.0

    def add(self, execution: StepExecution, topic: str, value: str) -> None:
        """Queue one item (and, first, the restart item its node, branch and call need)."""
        branch, call = _branch(execution), _call.get()
        mark = _mark(execution, call)
        items: list[Emission] = []
        noted = ""
        if mark not in self.seen:
            self.seen.add(mark)
            void_from = self.earlier.get(mark)
            if void_from is None:
                noted = mark  # the store notes this item's offset as where the scope began
            else:
                restart = json.dumps({"void_from": void_from})
                items.append(Emission("", execution.node_id, branch, restart, call=call, restart=True))
        items.append(Emission(topic, execution.node_id, branch, value, call=call, mark=noted))
        now, last = time.monotonic(), self._last_add
        self._last_add = now
        with self._lock:
            if self.failure is not None:
                raise self.failure
            self.pending.extend(items)
            if self._drain is not None:
                return  # the writer takes it with the next batch
            if now - last < BURST_S:
                self._drain = _writer().submit(self._write)
                return
            batch = self.pending[:]
            self.pending.clear()
        # A lone item (the first of a burst, or one of a slow stream such as a model's tokens) is
        # written here and now, as a durable call's record is: no thread to wake, one round trip.
        # Only the loop's thread adds items, and nothing else writes while no writer runs.
        self._append(batch)

    async def emit(self, execution: StepExecution, topic: str, value: str) -> None:
        self.add(execution, topic, value)
        # Back pressure: a step that emits faster than Redis takes its batches waits for them.
        drain = self._drain
        if drain is not None and len(self.pending) >= 2 * BATCH:
            await asyncio.wrap_future(drain)
        if self.failure is not None:
            raise self.failure

    async def flush(self) -> None:
        """Until every item queued is written; raises what stopped a write (FencedOut, StreamFull...)."""
        while (drain := self._drain) is not None:
            await asyncio.shield(asyncio.wrap_future(drain))
        if self.failure is not None:
            raise self.failure

    def saved(self) -> None:
        """A checkpoint was saved: it dropped the memo, so what came before is final."""
        self.seen.clear()
        self.earlier.clear()

    def _write(self) -> None:
        """The writer thread: batches until none is left, then it ends (the next emit starts another)."""
        while True:
            with self._lock:
                if not self.pending:
                    self._drain = None
                    return
                batch = self.pending[:BATCH]
                del self.pending[:BATCH]
            if not self._append(batch):
                with self._lock:
                    self._drain = None
                return

    def _append(self, batch: list[Emission]) -> bool:
        """One write; a failure is kept, and raised to the step by its next emit or its flush."""
        try:
            self.last_offset = self.port.append_stream(self.ctx, batch, self.last_offset)
        except BaseException as exc:
            with self._lock:
                self.failure = exc
                self.pending.clear()
            return False
        return True


def _emitter(scope: AttemptScope) -> Emitter:
    """The attempt's emitter, made on its first ``emit`` and kept in its scope (``stream``)."""
    stream = scope.stream
    if isinstance(stream, Emitter):
        return stream
    journal = scope.journal
    append = getattr(journal.port, "append_stream", None)
    if append is None:
        raise NotInRun("emit() needs a store that keeps streams; this attempt's store keeps none")
    earlier = {k: int(v) for k, v in journal.brought(MARK).items() if v.isdigit()}
    emitter = Emitter(journal.port, journal.ctx, earlier)  # type: ignore[arg-type]
    scope.stream = emitter
    return emitter


async def emit(value: Any, *, topic: str = "output") -> None:
    """Append ``value`` (JSON data, a pydantic model or a dataclass) to the run's stream, under ``topic``.

    Call it from inside a step. Readers get it live (``Client.stream``, ``reflexr-graph stream``,
    ``GET /api/runs/{id}/stream``) with its offset, topic, attempt and node, and it is kept with
    the run for its retention. Items are written in batches, up to 64 per round trip, so a step
    may emit thousands a second; a step's items are all written before the step returns.

    A step that runs again after a crash or a failure emits again, after an item with
    ``restart=True`` for its node: docs/guide.md#streaming-what-a-step-produces says what a reader
    sees.
    Past ``REFLEXR_STREAM_MAX_ITEMS`` items in the run, it raises :class:`~reflexr_graph.errors.StreamFull`.
    """
    execution = require_execution("emit()", "no stream to write to")
    check_topic(topic)
    emitter = _emitter(execution.scope)
    execution.emitted = True
    await emitter.emit(execution, topic, value_json(value, topic=topic, node=execution.node_id))
