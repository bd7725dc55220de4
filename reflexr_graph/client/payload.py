"""Inputs and state as the client sends them: JSON values, within the payload limit."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from reflexr_graph import errors


def plain(value: Any, part: str) -> Any:
    """``value`` as JSON data: a pydantic model or a dataclass (the graph's own input type) is dumped."""
    try:
        return to_jsonable_python(value)
    except Exception:
        raise errors.InvalidInputs(
            f"{part}: not JSON, a pydantic model or a dataclass; pass JSON values",
            [{"loc": [part], "msg": "is not JSON-serializable", "type": "json"}],
        ) from None


def to_json(value: Any, part: str, max_bytes: int) -> str:
    """Compact JSON text of ``value``; InvalidInputs when it is not plain JSON or is too large."""
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
