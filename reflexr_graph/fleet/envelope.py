"""What a raw queue item must be before kombu and Celery may read it.

kombu's Redis transport pops an item and parses it in the worker's main process, outside
any error handler: bytes that are not JSON, JSON that is not an object, an object without
``properties`` or ``delivery_tag``, headers that are not an object, a task name that is not
a string... each raises there and stops the worker ("Unrecoverable error"); a worker started
while such an item is queued dies at start. :func:`envelope_problem` names what is wrong with
an item before kombu sees it.

It checks what kombu's virtual transport and Celery's consumer read without a guard of their
own, and no more. What they do guard (a body Celery cannot decode, a content type it refuses,
an unknown task) reaches Celery's consumer, which quarantines it (fleet/consumer.py); the
shape of a task's body is the strategy guard's (fleet/guard.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kombu.utils.json import loads

from reflexr_graph.fleet.quarantine import QuarantineReason

DecodeBody = Callable[[Any, str | None], Any]
"""A channel's ``decode_body(body, encoding)``: base64 and any other codec it knows."""


@dataclass(frozen=True)
class Problem:
    reason: QuarantineReason
    detail: str
    """What is wrong, in words that carry no value of the item (it is logged)."""


def envelope_problem(item: bytes, *, codecs: Collection[str], decode_body: DecodeBody) -> Problem | None:
    """What makes ``item`` unsafe for kombu to read as a message envelope, or None.

    ``codecs`` are the body encodings the channel knows (besides utf-8); ``decode_body`` is
    the channel's own decoder, so a body that passes here decodes there too.
    """
    try:
        text = item.decode("utf-8")
    except UnicodeDecodeError:
        return Problem(QuarantineReason.NOT_UTF8, "the item is not UTF-8 text")
    try:
        # kombu's own parser, so what passes here parses the same there (its __type__ markers too).
        payload = loads(text)
    except Exception as exc:  # JSONDecodeError, a bad __type__ marker, RecursionError on deep nesting
        return Problem(
            QuarantineReason.NOT_JSON, f"the item is not JSON kombu can read ({type(exc).__name__})"
        )
    if not isinstance(payload, dict):
        return Problem(
            QuarantineReason.NOT_ENVELOPE, f"the item is a JSON {_kind(payload)}, not a message envelope"
        )
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        return Problem(
            QuarantineReason.NOT_ENVELOPE,
            "the item is a JSON object without 'properties', not a message envelope",
        )
    return (
        _properties_problem(properties)
        or _fields_problem(payload)
        or _body_problem(payload.get("body"), properties.get("body_encoding"), codecs, decode_body)
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _bad(detail: str) -> Problem:
    return Problem(QuarantineReason.BAD_ENVELOPE, detail)


def _optional_str(mapping: Mapping[str, Any], key: str) -> bool:
    value = mapping.get(key)
    return value is None or isinstance(value, str)


def _properties_problem(properties: dict[str, Any]) -> Problem | None:
    tag = properties.get("delivery_tag")
    if not isinstance(tag, str) or not tag:
        # kombu keys its unacked hash by the tag: a list or an object there raises in Redis.
        return _bad("its 'delivery_tag' property is missing or not a string")
    info = properties.get("delivery_info")
    if not (
        isinstance(info, dict)
        and isinstance(info.get("exchange"), str)
        and isinstance(info.get("routing_key"), str)
    ):
        return _bad("its 'delivery_info' property is not an object with 'exchange' and 'routing_key' strings")
    priority = properties.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        return _bad("its 'priority' property is not an integer")
    for key in ("body_encoding", "correlation_id", "reply_to"):
        if not _optional_str(properties, key):
            return _bad(f"its {key!r} property is not a string")
    return None


def _fields_problem(payload: dict[str, Any]) -> Problem | None:
    headers = payload.get("headers")
    if headers is not None and not isinstance(headers, dict):
        return _bad("its headers are not an object")
    if headers and not _optional_str(headers, "task"):
        # Celery looks the task up by this name in a dict: a list there raises.
        return _bad("its 'task' header is not a string")
    for key in ("content-type", "content-encoding"):
        if not _optional_str(payload, key):
            return _bad(f"its {key!r} is not a string")
    return None


def _body_problem(
    body: Any, encoding: str | None, codecs: Collection[str], decode_body: DecodeBody
) -> Problem | None:
    if not body:
        return None  # kombu reads no body; Celery then finds none to run and says so
    if not isinstance(body, str):
        return _bad(f"its body is a JSON {_kind(body)}, not text")
    if encoding and encoding.lower() != "utf-8" and encoding not in codecs:
        return _bad("its 'body_encoding' is not one kombu knows")
    try:
        decode_body(body, encoding)
    except Exception as exc:  # binascii.Error for bad base64; any codec's own error
        return Problem(
            QuarantineReason.UNDECODABLE_BODY,
            f"its body does not decode with its body_encoding ({type(exc).__name__})",
        )
    return None
