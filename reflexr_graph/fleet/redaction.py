"""Describing an error without the private values it may quote (G6).

A failed attempt's message and traceback are stored with the run and shown by ``history``,
the console and the API, so they must not carry the values of state or inputs. pydantic's
ValidationError quotes the values it rejected: it is rewritten as locations and reasons, in
the message and in every line of the traceback that would print it.
"""

from __future__ import annotations

from pydantic import ValidationError

from reflexr_graph.core import invalid
from reflexr_graph.fleet import frames

MAX_MESSAGE_LENGTH = 4000


def safe_message(exc: BaseException) -> str:
    """``str(exc)``, except that a ValidationError lists locations and reasons, not values."""
    message = invalid.summary(exc) if isinstance(exc, ValidationError) else str(exc)
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[:MAX_MESSAGE_LENGTH] + "... (truncated)"
    return message


def safe_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` and the exceptions it chains, with :func:`safe_message` lines and
    the framework's frames folded (fleet/frames.py)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    parts: list[str] = []
    for i, item in enumerate(reversed(chain)):
        if i:
            parts.append("\nThe above exception led to the following one:\n\n")
        parts.append("Traceback (most recent call last):\n")
        parts.extend(frames.format_tb(item.__traceback__))
        parts.append(f"{type(item).__module__}.{type(item).__qualname__}: {safe_message(item)}\n")
    return "".join(parts)
