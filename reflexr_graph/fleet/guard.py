"""A guard in front of Celery's task strategy: a malformed message is dropped, not fatal.

Celery 5.7's worker unpacks a message body as ``args, kwargs, embed`` in its main process,
outside any error handler: a JSON body of another shape (a string, a number, a list of
two) raises there and stops the whole worker ("Unrecoverable error"), and the message is
restored to the queue at shutdown, so it stops the next worker too. A missing ``id``
header does the same. The guard checks the shape first; the content type and JSON
decoding are still checked by Celery, which rejects pickled and undecodable bodies itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.worker.strategy import default

log = logging.getLogger(__name__)


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
    if not isinstance(headers.get("id"), str) or not headers["id"]:
        return "its 'id' header (the run id) is missing or not a string"
    timelimit = headers.get("timelimit")
    if timelimit is not None and not (isinstance(timelimit, list | tuple) and len(timelimit) == 2):
        return "its 'timelimit' header is not [soft, hard]"
    if not isinstance(headers.get("retries", 0) or 0, int):
        return "its 'retries' header is not a number"
    return None


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
    connection_errors = consumer.connection_errors

    def guarded(message: Any, body: Any, ack: Any, reject: Any, callbacks: Any, **kw: Any) -> Any:
        problem = message_problem(message, body)
        if problem is None:
            return handler(message, body, ack, reject, callbacks, **kw)
        headers = message.headers if isinstance(message.headers, dict) else {}
        log.error(
            "message %r for %s dropped: %s; the worker carries on, fix the producer",
            str(headers.get("id", "?"))[:200],
            task.name,
            problem,
        )
        ack(log, connection_errors)
        return None

    return guarded
