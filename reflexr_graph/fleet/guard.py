"""A guard in front of Celery's task strategy: a malformed message is quarantined, not fatal.

Celery 5.7's worker unpacks a message body as ``args, kwargs, embed`` in its main process,
outside any error handler: a JSON body of another shape (a string, a number, a list of
two) raises there and stops the whole worker ("Unrecoverable error"), and the message is
restored to the queue at shutdown, so it stops the next worker too. A missing ``id``
header does the same. The guard checks the shape first and moves a bad message aside to the
quarantine list (``invalid_task``); the content type and JSON decoding are still checked by
Celery, whose rejects the fleet's consumer quarantines too (fleet/consumer.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery.worker.strategy import default

from reflexr_graph.core.action import NAME_PATTERN, NAME_RULE
from reflexr_graph.fleet.quarantine import QuarantineReason, move_message_aside
from reflexr_graph.store.keys import MAX_RUN_ID_LENGTH, valid_run_id


def _protocol2_problem(payload: Any) -> str | None:
    if isinstance(payload, dict):
        # A hybrid protocol 1 body ({"args": ..., "kwargs": ...}); Celery checks kwargs itself.
        if not isinstance(payload.get("args", []), list | tuple):
            return "its 'args' is not a list"
        return None
    if not isinstance(payload, list | tuple) or len(payload) != 3:
        return "its body is not [args, kwargs, embed] (Celery message protocol 2)"
    args, kwargs, embed = payload
    if not isinstance(args, list | tuple):
        return "its args are not a list"
    if not isinstance(kwargs, dict):
        return "its kwargs are not an object"
    if embed is not None and not isinstance(embed, dict):
        return "its embed part is not an object"
    return None


def _headers_problem(headers: Any) -> str | None:
    if not isinstance(headers, dict):
        return "its headers are not a mapping"
    if not valid_run_id(headers.get("id")):
        return (
            f"its 'id' header (the run id) is not 1 to {MAX_RUN_ID_LENGTH} of A-Z a-z 0-9 _ . - starting "
            "with a letter or digit"
        )
    timelimit = headers.get("timelimit")
    if timelimit is not None and not (isinstance(timelimit, list | tuple) and len(timelimit) == 2):
        return "its 'timelimit' header is not [soft, hard]"
    if not isinstance(headers.get("retries", 0) or 0, int):
        return "its 'retries' header is not a number"
    return None


def _kwargs_of(message: Any, body: Any) -> Any:
    """The task's keyword arguments, of a protocol 1 body or a protocol 2 payload of good shape."""
    if body is not None:
        return body.get("kwargs")
    payload = message.payload
    return payload[1] if isinstance(payload, list | tuple) else payload.get("kwargs")


def graph_problem(message: Any, body: Any) -> str | None:
    """What makes the message's graph name unusable, or None (a missing one is the task's to
    dead-letter): a foreign producer's name is checked here, before it is logged or stored."""
    kwargs = _kwargs_of(message, body)
    graph = kwargs.get("graph") if isinstance(kwargs, dict) else None
    if graph is None or (isinstance(graph, str) and NAME_PATTERN.fullmatch(graph)):
        return None
    return f"its 'graph' is not a graph name: {NAME_RULE}"


def message_problem(message: Any, body: Any) -> str | None:
    """What makes this message unsafe to hand to Celery's request machinery, or None.

    ``body`` is the decoded body of a protocol 1 message (Celery decodes those itself); for
    protocol 2 it is None and the body is decoded here. A body that cannot be decoded, or
    has a content type other than JSON, raises the error Celery's consumer handles.
    """
    if body is not None:
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            return "its protocol 1 body has no string 'id'"
        return _protocol2_problem({"args": body.get("args", [])})
    return _headers_problem(message.headers) or _protocol2_problem(message.payload)


def strategy(task: Any, app: Any, consumer: Any, **kwargs: Any) -> Callable[..., Any]:
    """Celery's default strategy for ``task``, behind :func:`message_problem`."""
    handler = default(task, app, consumer, **kwargs)

    def guarded(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kw: Any) -> Any:
        problem, reason = message_problem(message, body), QuarantineReason.INVALID_TASK
        if problem is None:
            problem, reason = graph_problem(message, body), QuarantineReason.BAD_NAME
        if problem is None:
            return handler(message, body, ack, reject, callbacks, **kw)
        move_message_aside(message, reason, f"a {task.name} message: {problem}", app=app)
        return None

    return guarded
