"""What failed validation, told without the values that failed (G6): where and why, never what.

pydantic's ``str(ValidationError)`` quotes each rejected input, which may be private state or
inputs. Every message or problem document about invalid data is written from :func:`fields`,
which keeps only each error's location, message and type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

Found = ValidationError | Iterable[Mapping[str, Any]]
"""A ValidationError, or error dicts as ``ValidationError.errors()`` and FastAPI give them."""


def format_loc(loc: Iterable[object]) -> str:
    """``inputs.items[2].name`` from a location list."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _where(loc: Sequence[object]) -> str:
    return format_loc(loc) or "(root)"


def fields(found: Found, *, under: Sequence[str | int] = ()) -> list[dict[str, object]]:
    """Each failing location as ``{"loc", "msg", "type"}``, without the input; ``under`` prefixes
    every location (``("state",)``: which part of a document it is in)."""
    if isinstance(found, ValidationError):
        found = found.errors(include_input=False, include_context=False, include_url=False)
    out: list[dict[str, object]] = []
    for err in found:
        loc = [part if isinstance(part, int) else str(part) for part in (*under, *err.get("loc", ()))]
        # pydantic's wording for a validator's ValueError; the validator's own message says it all.
        msg = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        out.append({"loc": loc, "msg": msg, "type": str(err.get("type", ""))})
    return out


def describe(
    found: Found, *, under: Sequence[str | int] = (), where: Callable[[Sequence[object]], str] = _where
) -> str:
    """``state.items[0]: Input should be a valid integer; ...``: each location and why, no value.

    ``where`` names a location (an empty name leaves only the reason)."""
    parts = []
    for field in fields(found, under=under):
        loc = field["loc"]
        name = where(loc if isinstance(loc, list) else [loc])
        parts.append(f"{name}: {field['msg']}" if name else str(field["msg"]))
    return "; ".join(parts)


def summary(exc: ValidationError) -> str:
    """``2 validation error(s) for Model: a: ...; b: ...``, what ``str(exc)`` says, minus the values."""
    return f"{exc.error_count()} validation error(s) for {exc.title}: {describe(exc)}"
