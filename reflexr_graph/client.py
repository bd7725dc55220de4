"""The Python client: enqueue runs, read them, wait for them, and act on dead letters.

The client talks to the same Redis as the fleet: the store for run records, and the
broker for the ``reflexr_graph.run`` Celery messages. It never imports a graph's code;
inputs are validated against the JSON Schema a worker published (``schemas.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from types import TracebackType
from typing import Any, Self

from celery import Celery
from pydantic_core import to_jsonable_python

from reflexr_graph import errors, schemas, telemetry, time_travel
from reflexr_graph.core.tracing import current_trace_context
from reflexr_graph.fleet.app import celery_config
from reflexr_graph.fleet.dispatch import send_run
from reflexr_graph.fleet.settings import Settings, load_settings
from reflexr_graph.model import TERMINAL, CheckpointDetail, CheckpointInfo, RunInfo, Status
from reflexr_graph.store.records import RunEvent, WorkerInfo
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.waits import SignalOutcome

log = logging.getLogger(__name__)

SCHEMA_CACHE_S = 2.0
"""How long a client trusts a published schema before reading it again (a redeploy shows within this)."""
DISPATCH_GRACE_MS = 30_000
"""If the client dies between creating a run and sending its message, the reaper sends it after this."""


def _producer_app(settings: Settings) -> Celery:
    """A Celery app that only sends messages, configured like the fleet (JSON, same queue)."""
    app = Celery("reflexr_graph.client", set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


def _plain(value: Any, part: str) -> Any:
    """``value`` as JSON data: a pydantic model or a dataclass (the graph's own input type) is dumped."""
    try:
        return to_jsonable_python(value)
    except Exception:
        raise errors.InvalidInputs(
            f"{part}: not JSON, a pydantic model or a dataclass; pass JSON values",
            [{"loc": [part], "msg": "is not JSON-serializable", "type": "json"}],
        ) from None


def _to_json(value: Any, part: str, max_bytes: int) -> str:
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise errors.InvalidInputs(
            f"{part}: not plain JSON (NaN, Infinity or a non-JSON type); pass JSON values",
            [{"loc": [part], "msg": "is not plain JSON", "type": "json"}],
        ) from None
    if len(text) > max_bytes:
        raise errors.InvalidInputs(
            f"{part}: {len(text)} bytes of JSON, above REFLEXR_MAX_PAYLOAD_BYTES ({max_bytes}); "
            "store large documents elsewhere (object storage, a database) and pass a reference",
            [{"loc": [part], "msg": f"is larger than {max_bytes} bytes", "type": "too_large"}],
        )
    return text


class Client:
    """Enqueue and manage runs. Build it with :meth:`from_url` or :meth:`from_settings`."""

    def __init__(self, settings: Settings, store: RedisStore | None = None) -> None:
        self.settings = settings
        self.store = store or RedisStore.from_url(
            settings.redis_url,
            run_retention_s=settings.run_retention_s,
            dead_retention_s=settings.dead_retention_s,
        )
        self._app: Celery | None = None
        self._schemas: dict[str, tuple[float, schemas.GraphSchema, list[str]]] = {}
        self._unserved_news: set[str] = set()
        # Producer side of tracing: the enqueuer's trace is recorded with the run and carried in
        # the message. With no OTEL_* configuration and no provider, nothing is installed.
        telemetry.setup_process()

    @classmethod
    def from_url(cls, redis_url: str, **overrides: Any) -> Client:
        """A client on ``redis_url``; other settings come from ``REFLEXR_*`` or ``overrides``."""
        return cls(load_settings(strict=False, redis_url=redis_url, **overrides))

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Client:
        """A client configured from ``REFLEXR_*`` environment variables (or the given settings)."""
        return cls(settings or load_settings(strict=False))

    @property
    def app(self) -> Celery:
        """The producer Celery app, created on first send."""
        if self._app is None:
            self._app = _producer_app(self.settings)
        return self._app

    def close(self) -> None:
        """Release the Redis and broker connections."""
        if self._app is not None:
            self._app.close()
            self._app = None
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- enqueue ----------------------------------------------------------------------------

    def _published(self, name: str) -> tuple[schemas.GraphSchema, list[str]]:
        """The published entry of ``name`` and its live workers, read at most every SCHEMA_CACHE_S:
        enqueue is a hot path."""
        now = time.monotonic()
        cached = self._schemas.get(name)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        entry, workers = schemas.load_with_workers(self.store, name)
        self._schemas[name] = (now + SCHEMA_CACHE_S, entry, workers)
        if not workers:
            # Said once the run is queued, and at most every SCHEMA_CACHE_S: a producer that
            # enqueues thousands of runs while the workers are down gets the news, not a line each.
            self._unserved_news.add(name)
        return entry, workers

    def graph(self, name: str) -> schemas.GraphSchema:
        """The published schema entry of graph ``name``; UnknownGraph if no worker published it."""
        return schemas.load(self.store, name)

    def graphs(self) -> list[schemas.GraphSchema]:
        """Every graph a worker (or ``reflexr-graph publish``) has published, by name."""
        return schemas.list_graphs(self.store)

    def serving(self, graphs: list[str]) -> dict[str, list[str]]:
        """For each graph, the names of the live workers that run it."""
        return self.store.serving(graphs)

    def workers(self) -> list[WorkerInfo]:
        """Every live worker: its name, graphs, queues, pool and concurrency."""
        return self.store.live_workers()

    def enqueue(
        self, graph: str, inputs: Any, *, state: Any = None, idempotency_key: str | None = None
    ) -> str:
        """Validate and queue a run of ``graph``; returns its run id.

        ``inputs`` and ``state`` are JSON values, or the graph's own pydantic models and
        dataclasses. Raises UnknownGraph or InvalidInputs (listing each failing location)
        before anything is queued; logs a warning when no live worker serves the graph (the
        run then waits for one, up to REFLEXR_UNKNOWN_GRAPH_GRACE_S).

        With ``idempotency_key``, every caller using the same key for the same graph, with
        the same inputs and state, gets the same run id while that run's record lives (its
        retention), and only the first sends a message; a dead run's key names the dead run,
        which ``replay`` runs again. The same key with other inputs raises IdempotencyConflict.
        """
        entry, _workers = self._published(graph)
        inputs, state = _plain(inputs, "inputs"), None if state is None else _plain(state, "state")
        schemas.validate(entry, inputs, state)
        limit = self.settings.max_payload_bytes
        run_id, created = self.store.create_run(
            str(uuid.uuid4()),
            graph=graph,
            inputs_json=_to_json(inputs, "inputs", limit),
            state_json=None if state is None else _to_json(state, "state", limit),
            idempotency_key=idempotency_key,
            max_attempts=entry.max_attempts or self.settings.max_attempts,
            dispatch_grace_ms=DISPATCH_GRACE_MS,
            # Every attempt of the run joins the caller's trace, however it is re-sent.
            trace_context=current_trace_context(),
        )
        if created:
            self._send(
                run_id,
                graph,
                f"run {run_id} is recorded",
                "enqueue again with the same idempotency key to get the same run",
            )
        self._say_if_unserved(run_id, graph)
        return run_id

    def _say_if_unserved(self, run_id: str, graph: str) -> None:
        if graph in self._unserved_news:
            self._unserved_news.discard(graph)
            log.warning(
                "run %s queued, but no live worker serves graph %r right now: its runs wait up to %gs "
                "(REFLEXR_UNKNOWN_GRAPH_GRACE_S) for one, then are dead-lettered as unknown_graph",
                run_id,
                graph,
                self.settings.unknown_graph_grace_s,
            )

    # -- reads ------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunInfo:
        """A snapshot of the run; RunNotFound if there is no such run."""
        return self.store.get(run_id)

    def runs(
        self, *, status: Status | str | None = None, graph: str | None = None, limit: int = 50
    ) -> list[RunInfo]:
        """Runs newest first, optionally only those in ``status`` or of ``graph``."""
        return self.store.list_runs(status=status, graph=graph, limit=limit)

    def history(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first; RunNotFound if there is no such run."""
        self.store.get(run_id)
        return self.store.events(run_id)

    def events(self, run_id: str, after: str = "0-0", block_ms: int | None = None) -> list[RunEvent]:
        """Events after stream id ``after``; with ``block_ms``, wait that long (0: forever) for one."""
        return self.store.events(run_id, after=after, block_ms=block_ms)

    def dead_letters(
        self, graph: str | None = None, reason: str | None = None, *, limit: int = 1000
    ) -> list[RunInfo]:
        """Dead-lettered runs, most recently dead first, optionally of one graph or reason."""
        return self.store.dead_letters(graph=graph, reason=reason, limit=limit)

    def traceback(self, run_id: str) -> str | None:
        """The last failed attempt's traceback, if any."""
        return self.store.traceback(run_id)

    def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """The latest checkpoint's ``seq``, ``saved_at``, ``size`` and ``next_node``, if any."""
        return self.store.checkpoint_info(run_id)

    def wait(self, run_id: str, timeout: float | None = None) -> RunInfo:
        """Block until the run is terminal and return it; WaitTimeout after ``timeout`` seconds.

        Sleeps on the run's event stream (XREAD BLOCK), so it wakes as soon as the run
        changes. A run a foreign producer sent with ``send_task`` has no record until a
        worker takes its first delivery: ``wait`` waits for the record to appear too, within
        the same timeout. ``timeout=None`` waits for as long as it takes.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        last = "0-0"
        while True:
            try:
                info: RunInfo | None = self.store.get(run_id)
            except errors.RunNotFound:
                info = None
            if info is not None and info.status in TERMINAL:
                return info
            block_ms = 0
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.WaitTimeout(_wait_timeout(run_id, info, timeout))
                block_ms = max(1, int(remaining * 1000))
            # XREAD BLOCK on a stream that does not exist yet wakes when its first event is added.
            found = self.store.events(run_id, after=last, block_ms=block_ms)
            if found:
                last = found[-1].id

    # -- signals ----------------------------------------------------------------------------

    def signal(self, run_id: str, name: str, value: Any) -> bool:
        """Send signal ``name`` with ``value`` to a run; True when it woke the run, False when it waits.

        The value (JSON, or the signal's own pydantic model or dataclass) is validated against
        the schema the graph publishes for the signal before anything is written: UnknownSignal
        for a name the graph does not declare, InvalidInputs listing each failing location. When
        the run is waiting for this signal, it is queued at once (True). Otherwise the value is
        kept in the run's mailbox, and the step's ``wait_for_signal(name, ...)`` takes it when it
        gets there, without suspending (False). RunNotFound for an unknown run;
        OperationRefused for a finished one; SignalPending when a signal of this name was sent
        and not taken yet (a second would replace it).
        """
        info = self.store.get(run_id)
        if info.status in TERMINAL:
            raise errors.OperationRefused(
                f"run {run_id} is {info.status.value}; only a run that has not finished takes signals",
                status=info.status.value,
            )
        entry, _workers = self._published(info.graph)
        value = _plain(value, "value")
        schemas.validate_signal(entry, name, value)
        value_json = _to_json(value, "value", self.settings.max_payload_bytes)
        outcome, graph = self.store.signal(run_id, name, value_json, dispatch_grace_ms=DISPATCH_GRACE_MS)
        if outcome is SignalOutcome.KEPT:
            return False
        self._send(run_id, graph, f"the signal is recorded and run {run_id} queued", "do not send it again")
        return True

    def _send(self, run_id: str, graph: str, recorded: str, advice: str) -> None:
        """Send the run's message; the run is recorded and due, so a failed send is reported as such."""
        try:
            send_run(self.app, run_id, graph)
        except errors.StoreUnavailable as exc:
            # Whoever retries must know the run goes ahead anyway: the reaper sends the due run.
            raise type(exc)(
                f"{exc}; {recorded}, and a worker sends it within {DISPATCH_GRACE_MS // 1000}s once "
                f"Redis answers ({advice})",
                endpoint=exc.endpoint,
                kind=exc.kind,
            ) from exc

    # -- operator actions -------------------------------------------------------------------

    def replay(self, run_id: str, *, from_start: bool = False, from_seq: int | None = None) -> RunInfo:
        """Queue a dead or cancelled run again, with a fresh attempt budget; it resumes from its
        checkpoint unless ``from_start``.

        ``from_seq`` resumes it from an earlier checkpoint of its own history instead, to back
        out of a bad step: that checkpoint becomes the latest, and the ones after it are dropped.
        It is refused (StaleCheckpoint) when saved by another version of the graph, and
        CheckpointNotFound names the seqs the run keeps when it keeps no such one.

        OperationRefused for a run in any other status, RunNotFound for an unknown id.
        """
        if from_seq is not None:
            if from_start:
                raise errors.InvalidInputs(
                    "replay from the start or from a checkpoint, not both",
                    [{"loc": ["from_seq"], "msg": "cannot be given with from_start", "type": "conflict"}],
                )
            saved = self.store.read_checkpoint(run_id, from_seq)
            time_travel.check_current(run_id, saved, self._published(saved.graph)[0])
        info = self.store.replay(run_id, from_start=from_start, from_seq=from_seq)
        send_run(self.app, run_id, info.graph)
        return info

    # -- time travel ------------------------------------------------------------------------

    def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint the run keeps, oldest first, the latest last: ``seq``, ``saved_at``,
        ``next_node``, ``size`` and the ``attempt`` that saved it. No values: see :meth:`checkpoint`.

        A run keeps its latest checkpoint and up to ``REFLEXR_CHECKPOINT_HISTORY`` before it (as
        the workers are configured); RunNotFound if there is no such run.
        """
        return self.store.checkpoints(run_id)

    def checkpoint(self, run_id: str, seq: int) -> CheckpointDetail:
        """Checkpoint ``seq`` of the run with its values as JSON: the state, the graph inputs and
        the next task's inputs (the output, for the finished one).

        RunNotFound, or CheckpointNotFound (naming the seqs the run keeps).
        """
        return time_travel.detail(run_id, self.store.read_checkpoint(run_id, seq))

    def fork(
        self, run_id: str, *, from_seq: int, state: Any = None, idempotency_key: str | None = None
    ) -> str:
        """Create a new run of the same graph that resumes from checkpoint ``from_seq`` of
        ``run_id``; returns the new run's id. Nothing of the source run changes, whatever its
        status (it must still exist).

        ``state`` (JSON, or the graph's own model or dataclass), when given, replaces the
        checkpoint's state; it is validated against the published state schema first
        (InvalidInputs, naming locations). A checkpoint saved by another version of the graph
        is refused (StaleCheckpoint). A fork from the finished checkpoint is created succeeded
        with the same output, and no attempt runs. The new run records ``forked_from`` and
        ``forked_at_seq``. The same ``idempotency_key`` gives the same fork, as for :meth:`enqueue`.
        """
        saved = self.store.read_checkpoint(run_id, from_seq)
        entry, _workers = self._published(saved.graph)
        edited = None if state is None else _plain(state, "state")
        if edited is not None:
            _to_json(edited, "state", self.settings.max_payload_bytes)
        seed = time_travel.seed(run_id, saved, entry, edited)
        new_id, created = self.store.create_run(
            str(uuid.uuid4()),
            graph=saved.graph,
            inputs_json=saved.inputs_json,
            state_json=saved.state_json,
            idempotency_key=idempotency_key,
            max_attempts=entry.max_attempts or self.settings.max_attempts,
            dispatch_grace_ms=DISPATCH_GRACE_MS,
            trace_context=current_trace_context(),
            fork=seed,
        )
        if seed.output_json is None:
            if created:
                self._send(
                    new_id,
                    saved.graph,
                    f"fork {new_id} is recorded",
                    "fork again with the same idempotency key to get the same fork",
                )
            self._say_if_unserved(new_id, saved.graph)
        return new_id

    def cancel(self, run_id: str) -> RunInfo:
        """Cancel a queued, running, retrying or waiting run; OperationRefused for a finished one."""
        return self.store.cancel(run_id)

    def purge(self, run_id: str) -> bool:
        """Delete a dead or cancelled run; False if there was no such run."""
        return self.store.purge(run_id)


def _wait_timeout(run_id: str, info: RunInfo | None, timeout: float | None) -> str:
    if info is None:
        return (
            f"no run {run_id} appeared within {timeout:g}s: a run sent with send_task is recorded when a "
            "worker takes its first delivery; check the id, and that a worker consumes the queue it was "
            "sent to"
        )
    return f"run {run_id} is still {info.status.value} after {timeout:g}s; wait longer or check its workers"


class AsyncClient:
    """The :class:`Client` API for asyncio code; each call runs in a worker thread."""

    def __init__(self, client: Client) -> None:
        self.sync = client

    @classmethod
    def from_url(cls, redis_url: str, **overrides: Any) -> AsyncClient:
        """An async client on ``redis_url``."""
        return cls(Client.from_url(redis_url, **overrides))

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> AsyncClient:
        """An async client configured from ``REFLEXR_*`` environment variables."""
        return cls(Client.from_settings(settings))

    async def enqueue(
        self, graph: str, inputs: Any, *, state: Any = None, idempotency_key: str | None = None
    ) -> str:
        """See :meth:`Client.enqueue`."""
        return await asyncio.to_thread(
            self.sync.enqueue, graph, inputs, state=state, idempotency_key=idempotency_key
        )

    async def get(self, run_id: str) -> RunInfo:
        """See :meth:`Client.get`."""
        return await asyncio.to_thread(self.sync.get, run_id)

    async def wait(self, run_id: str, timeout: float | None = None) -> RunInfo:
        """See :meth:`Client.wait`."""
        return await asyncio.to_thread(self.sync.wait, run_id, timeout)

    async def history(self, run_id: str) -> list[RunEvent]:
        """See :meth:`Client.history`."""
        return await asyncio.to_thread(self.sync.history, run_id)

    async def replay(self, run_id: str, *, from_start: bool = False, from_seq: int | None = None) -> RunInfo:
        """See :meth:`Client.replay`."""
        return await asyncio.to_thread(self.sync.replay, run_id, from_start=from_start, from_seq=from_seq)

    async def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """See :meth:`Client.checkpoints`."""
        return await asyncio.to_thread(self.sync.checkpoints, run_id)

    async def checkpoint(self, run_id: str, seq: int) -> CheckpointDetail:
        """See :meth:`Client.checkpoint`."""
        return await asyncio.to_thread(self.sync.checkpoint, run_id, seq)

    async def fork(
        self, run_id: str, *, from_seq: int, state: Any = None, idempotency_key: str | None = None
    ) -> str:
        """See :meth:`Client.fork`."""
        return await asyncio.to_thread(
            self.sync.fork, run_id, from_seq=from_seq, state=state, idempotency_key=idempotency_key
        )

    async def signal(self, run_id: str, name: str, value: Any) -> bool:
        """See :meth:`Client.signal`."""
        return await asyncio.to_thread(self.sync.signal, run_id, name, value)

    async def cancel(self, run_id: str) -> RunInfo:
        """See :meth:`Client.cancel`."""
        return await asyncio.to_thread(self.sync.cancel, run_id)

    async def dead_letters(
        self, graph: str | None = None, reason: str | None = None, *, limit: int = 1000
    ) -> list[RunInfo]:
        """See :meth:`Client.dead_letters`."""
        return await asyncio.to_thread(self.sync.dead_letters, graph, reason, limit=limit)

    async def runs(
        self, *, status: Status | str | None = None, graph: str | None = None, limit: int = 50
    ) -> list[RunInfo]:
        """See :meth:`Client.runs`."""
        return await asyncio.to_thread(self.sync.runs, status=status, graph=graph, limit=limit)

    async def serving(self, graphs: list[str]) -> dict[str, list[str]]:
        """See :meth:`Client.serving`."""
        return await asyncio.to_thread(self.sync.serving, graphs)

    async def workers(self) -> list[WorkerInfo]:
        """See :meth:`Client.workers`."""
        return await asyncio.to_thread(self.sync.workers)

    async def graph(self, name: str) -> schemas.GraphSchema:
        """See :meth:`Client.graph`."""
        return await asyncio.to_thread(self.sync.graph, name)

    async def graphs(self) -> list[schemas.GraphSchema]:
        """See :meth:`Client.graphs`."""
        return await asyncio.to_thread(self.sync.graphs)

    async def events(self, run_id: str, after: str = "0-0", block_ms: int | None = None) -> list[RunEvent]:
        """See :meth:`Client.events`; a blocking read holds a worker thread while it waits."""
        return await asyncio.to_thread(self.sync.events, run_id, after, block_ms)

    async def traceback(self, run_id: str) -> str | None:
        """See :meth:`Client.traceback`."""
        return await asyncio.to_thread(self.sync.traceback, run_id)

    async def checkpoint_info(self, run_id: str) -> dict[str, Any] | None:
        """See :meth:`Client.checkpoint_info`."""
        return await asyncio.to_thread(self.sync.checkpoint_info, run_id)

    async def purge(self, run_id: str) -> bool:
        """See :meth:`Client.purge`."""
        return await asyncio.to_thread(self.sync.purge, run_id)

    async def close(self) -> None:
        """See :meth:`Client.close`."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
