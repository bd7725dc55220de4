"""The read-back rule (docs/design.md#the-read-back-rule): save only what restores as it was.

A value is written down through its type and read back through the same type; the
boundary is saved only if what comes back equals what went in. Before a decision, the
value must also keep its class, since a decision routes by class. A one-shot iterator is
never written down: dumping it would use it up before the fork that maps over it ran.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from reflexr_graph.errors import Kind, ReflexrError


class NotReadable(ReflexrError):
    """The value does not read back as it was; the boundary is skipped."""

    error_kind = Kind.INVALID


@dataclass(frozen=True)
class Codec:
    """One type's adapter, with the read-back check that guards every write."""

    adapter: TypeAdapter[Any]

    def dump(self, value: Any, *, same_class: bool = False) -> str:
        """The JSON text of ``value``, or NotReadable when it would not restore as it was.

        Writing and reading back go through pydantic-core's JSON path, the same one
        ``load`` uses, so what passes here is exactly what a resume will read.
        """
        if isinstance(value, Iterator | AsyncIterator):
            raise NotReadable("a one-shot iterator is never written down")
        try:
            # The adapter's own serializer and validator: TypeAdapter's methods only pass their
            # defaults on, which costs a boundary two calls and their keywords (about 1 µs each).
            dumped = self.adapter.serializer.to_json(value, warnings=False)
            back = self.adapter.validator.validate_json(dumped)
        except Exception as exc:
            raise NotReadable(f"does not serialize through its type ({type(exc).__name__})") from None
        if back != value:
            raise NotReadable("reads back unequal")
        if same_class and type(back) is not type(value):
            raise NotReadable(f"reads back as {type(back).__name__}, not {type(value).__name__}")
        return dumped.decode()

    def load(self, parsed: Any) -> Any:
        """Validate a part of a parsed checkpoint as JSON again, as ``dump`` checked it (only on resume)."""
        return self.adapter.validate_json(json.dumps(parsed))
