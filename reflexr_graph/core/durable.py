"""``durable_call``: a call inside a step that a retry does not make again.

Temporal, DBOS and Restate record every call a workflow makes; reflexr records the calls a
step makes through ``durable_call``, in the journal of the run (journal.py). When the step
runs again after a crash or an exception, the calls it had already made return their
recorded results, in the order they were made; the first call that was not recorded runs
for real. A step that made three model calls and crashed in its fourth pays for one call.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any, TypeVar

from opentelemetry import trace
from pydantic import TypeAdapter, ValidationError

from reflexr_graph.core import tracing
from reflexr_graph.core.call_retry import CallRetry, RetryAfter, call_labels, retry_after_of, with_retries
from reflexr_graph.core.emit import in_call
from reflexr_graph.core.readback import Codec, NotReadable
from reflexr_graph.core.steps import StepExecution, require_execution
from reflexr_graph.errors import RunFailure

T = TypeVar("T")


@lru_cache(maxsize=256)
def codec_of(tp: Any) -> Codec:
    """The codec of type ``tp``, built once: a durable call's result or a signal's value."""
    return Codec(TypeAdapter(tp))


def _unwrap_awaitable(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Awaitable, typing.Coroutine) or (
        isinstance(origin, type) and issubclass(origin, typing.Awaitable)
    ):
        args = typing.get_args(hint)
        return args[-1] if args else Any
    return hint


def _result_type(fn: Callable[..., Any], given: Any) -> Any:
    """``result_type`` when given, else ``fn``'s return annotation (an async def's awaited type), else Any."""
    if given is not None:
        return given
    try:
        hint = typing.get_type_hints(fn).get("return", Any)
    except Exception:
        return Any  # a partial, a builtin, an annotation that does not resolve
    return _unwrap_awaitable(hint)


async def _run(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def durable_call(
    name: str,
    fn: Callable[..., T] | Callable[..., Awaitable[T]],
    /,
    *args: Any,
    result_type: Any = None,
    retry: CallRetry | None = None,
    **kwargs: Any,
) -> T:
    """Call ``fn(*args, **kwargs)`` (sync or async) once per step execution, and record its result.

    Call it from inside a step. The first time, ``fn`` runs and its result is recorded, as
    JSON through ``result_type`` (or ``fn``'s return annotation, else Any), keyed by the step
    execution (node, branch and inputs), by ``name``, and by how many times ``name`` was
    called in this execution, so loops work. When the step runs again after a crash or an
    exception, each recorded call returns its recorded result without running ``fn``; the
    first unrecorded one runs. An exception from ``fn`` is not recorded. A result that does
    not read back as it was through its type fails the run permanently, naming the call.
    The records are dropped once a checkpoint past the step is saved.

    With ``retry=CallRetry(...)`` a call that raises is tried again inside the step, after a
    backoff or the ``retry_after`` its error carries, spending none of the run's attempts
    (core/call_retry.py); each retry is a ``call_retried`` event in the run's history.
    """
    tp = _result_type(fn, result_type)
    result: T = await recorded_call(name, lambda: _run(fn, args, kwargs), result_type=tp, retry=retry)
    return result


async def recorded_call(
    name: str,
    call: Callable[[], Awaitable[Any]],
    *,
    result_type: Any,
    retry: CallRetry | None = None,
    retry_after: RetryAfter = retry_after_of,
) -> Any:
    """:func:`durable_call` of ``call()``, whose result is recorded through ``result_type``;
    ``retry_after`` reads the wait an error asks for (pydantic-ai's model errors: ai/backend.py)."""
    execution = require_execution(f"durable_call({name!r})", "nothing to record into")
    codec = codec_of(result_type)
    key = execution.call_key(name)
    recorded = execution.journal.get(key) if key is not None else None
    if recorded is not None:
        try:
            value = codec.load(json.loads(recorded))
        except (ValueError, ValidationError):
            pass  # its type changed since it was recorded: make the call again
        else:
            execution.scope.tally.reused_calls += 1
            trace.get_current_span().add_event(tracing.EVENT_CALL_REUSED, {tracing.ATTR_CALL: name})
            return value
    with in_call(f"{name}#{execution.calls.get(('c', name), 0) - 1}" if key is not None else name):
        result = await _tries(execution, name, call, retry, retry_after)
    if key is None:
        execution.scope.tally.note_once(
            execution.node_id,
            "the durable calls of step %s are not recorded: its inputs cannot be written down, so "
            "nothing would tell this execution's records from another's; give the step an input type "
            "that reads back as it was",
        )
        return result
    await _record(execution, name, key, codec, result_type, result)
    return result


async def _tries(
    execution: StepExecution,
    name: str,
    call: Callable[[], Awaitable[Any]],
    retry: CallRetry | None,
    retry_after: RetryAfter,
) -> Any:
    """``call()``, once, or under ``retry``: each retry told to the run's history first."""
    if retry is None:
        return await call()
    journal, node = execution.journal, execution.node_id

    def told(failed: int, exc: Exception, delay_s: float) -> None:
        journal.call_retried(node, name, failed, exc, delay_s)

    labels = call_labels(execution.scope.tally.graph, node, name)
    return await with_retries(retry, call, retry_after=retry_after, notify=told, labels=labels)


async def _record(execution: StepExecution, name: str, key: str, codec: Codec, tp: Any, result: Any) -> None:
    """Record call ``name``'s result under ``key``, once the items it emitted are in the stream."""
    try:
        dumped = codec.dump(result)
    except NotReadable as why:
        raise RunFailure(
            f"durable_call {name!r} in step {execution.node_id!r} returned a value that {why} through "
            f"its result type {getattr(tp, '__name__', repr(tp))}; pass result_type= a type its result "
            "reads back as (its class, a pydantic model, a dataclass), or return JSON data",
            reason="not_recordable",
            permanent=True,
        ) from None
    await execution.flush_emitted()  # the items the call emitted are in the stream before its record
    execution.journal.put(key, dumped)
