"""Raw queue items for quarantine tests: kombu envelopes built by hand, and ten kinds of garbage.

An envelope is what kombu's Redis transport LPUSHes for a message (JSON: body, content type,
headers, properties). Tests push items with plain redis-py, bypassing kombu and Celery, as a
buggy or hostile producer would.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reflexr_graph.config.dispatch import TASK_NAME

EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
HUGE_BYTES = 3 * 1024 * 1024


def headers(task_id: str, task: str = TASK_NAME) -> dict[str, Any]:
    """Celery message protocol 2 headers, as any producer library sends them."""
    return {
        "lang": "py", "task": task, "id": task_id, "root_id": task_id, "parent_id": None,
        "group": None, "retries": 0, "eta": None, "expires": None, "timelimit": [None, None],
        "shadow": None, "argsrepr": "", "kwargsrepr": "", "origin": "test", "ignore_result": True,
    }  # fmt: skip


def envelope(
    queue: str, kwargs: dict[str, Any], *, task: str = TASK_NAME, task_id: str | None = None
) -> dict[str, Any]:
    """The kombu envelope of one Celery task message with these keyword arguments."""
    task_id = task_id or str(uuid.uuid4())
    body = json.dumps([[], kwargs, EMBED]).encode()
    return {
        "body": base64.b64encode(body).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers(task_id, task),
        "properties": {
            "correlation_id": task_id, "reply_to": "", "delivery_mode": 2, "priority": 0,
            "delivery_info": {"exchange": queue, "routing_key": queue},
            "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
        },
    }  # fmt: skip


def good(queue: str, value: int = 1, task_id: str | None = None) -> bytes:
    """A valid run message of the ``steps`` test graph, as raw bytes."""
    return json.dumps(
        envelope(queue, {"graph": "steps", "inputs": {"value": value}}, task_id=task_id)
    ).encode()


def _with(queue: str, change: Callable[[dict[str, Any]], None]) -> bytes:
    env = envelope(queue, {"graph": "steps", "inputs": {}})
    change(env)
    return json.dumps(env).encode()


def _bad_body(queue: str, i: int) -> bytes:
    def change(env: dict[str, Any]) -> None:
        # Odd: not base64 at all (bad padding). Even: base64 of text that is not JSON.
        env["body"] = "abc" if i % 2 else base64.b64encode(b"{not json").decode()

    return _with(queue, change)


_WRONG_TYPES: list[Callable[[dict[str, Any]], None]] = [
    lambda e: e.update(headers=["not", "an", "object"]),
    lambda e: e["properties"].update(delivery_info="not an object"),
    lambda e: e["properties"].update(delivery_tag=5),
    lambda e: e["headers"].update(task=["a", "list"]),
    lambda e: e.update({"content-type": 5}),
]


@dataclass(frozen=True)
class Kind:
    name: str
    reason: str
    """The quarantine reason each item of this kind gets."""
    make: Callable[[str, int], bytes]
    """``make(queue, i)``: the i-th item of this kind."""


KINDS: tuple[Kind, ...] = (
    Kind("raw non-UTF-8 bytes", "not_utf8", lambda q, i: b"\xff\xfe\x00\x80garbage" + bytes([i])),
    Kind("non-JSON text", "not_json", lambda q, i: f"not json {i}".encode()),
    Kind(
        "JSON scalars", "not_envelope", lambda q, i: [b'"just a json string"', b"42", b"null", b"true"][i % 4]
    ),
    Kind("a JSON list", "not_envelope", lambda q, i: json.dumps([i, "a", None]).encode()),
    Kind(
        "a JSON object, not an envelope",
        "not_envelope",
        lambda q, i: json.dumps({"graph": "steps", "i": i}).encode(),
    ),
    Kind("a truncated envelope", "not_json", lambda q, i: good(q)[: 40 + i * 7]),
    Kind("a huge item", "not_envelope", lambda q, i: json.dumps({"blob": "x" * HUGE_BYTES, "i": i}).encode()),
    Kind("an envelope whose body is not base64/JSON", "undecodable_body", _bad_body),
    Kind(
        "an envelope with wrong-typed headers/properties",
        "bad_envelope",
        lambda q, i: _with(q, _WRONG_TYPES[i % len(_WRONG_TYPES)]),
    ),
    Kind(
        "an unknown task name",
        "unknown_task",
        lambda q, i: json.dumps(envelope(q, {"graph": "steps", "inputs": {}}, task="no.such.task")).encode(),
    ),
)


def items(queue: str, per_kind: int) -> list[tuple[Kind, bytes]]:
    """``per_kind`` items of every kind, interleaved (kind 1, 2, ... 10, 1, 2, ...)."""
    return [(kind, kind.make(queue, i)) for i in range(per_kind) for kind in KINDS]
