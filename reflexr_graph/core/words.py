"""Counted nouns in messages: ``1 durable call``, ``2 durable calls``, never ``1 calls``."""

from __future__ import annotations


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``count`` and the noun in the number it takes: ``plural(1, "character")`` is
    ``1 character``, ``plural(0, "branch step")`` is ``0 branch steps``; an irregular plural is
    given (``plural(2, "entry", "entries")``)."""
    noun = singular if count == 1 else (plural_form or f"{singular}s")
    return f"{count} {noun}"
