"""The read-back rule (ADR-0009, amendment 2026-09-29): save only what restores as it was.

A value is written down through its type and read back through the same type; the
boundary is saved only if what comes back equals what went in. Before a decision, the
value must also keep its class, since a decision routes by class. A one-shot iterator is
never written down: dumping it would use it up before the fork that maps over it ran.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter


class NotReadable(Exception):
    """The value does not read back as it was; the boundary is skipped."""


@dataclass(frozen=True)
class Codec:
    """One type's adapter, with the read-back check that guards every write."""

    adapter: TypeAdapter[Any]

    def dump(self, value: Any, *, same_class: bool = False) -> Any:
        """The JSON-able form of ``value``, or NotReadable when it would not restore as it was."""
        if isinstance(value, Iterator | AsyncIterator):
            raise NotReadable("a one-shot iterator is never written down")
        try:
            dumped = self.adapter.dump_python(value, mode="json", warnings=False)
            back = self.adapter.validate_python(dumped)
        except Exception as exc:
            raise NotReadable(f"does not serialize through its type ({type(exc).__name__})") from None
        if back != value:
            raise NotReadable("reads back unequal")
        if same_class and type(back) is not type(value):
            raise NotReadable(f"reads back as {type(back).__name__}, not {type(value).__name__}")
        return dumped

    def load(self, dumped: Any) -> Any:
        return self.adapter.validate_python(dumped)
