"""Spotting, when a GraphAction is built, a state type that checkpoints cannot hold.

A state field typed as an arbitrary class (``arbitrary_types_allowed``) never writes down
as JSON, and one typed ``Any`` or ``object`` writes down only when its value happens to be
plain JSON. Either turns every boundary of a run into a skipped one, silently, so the
build warns. Containers of ``Any`` (``dict[str, Any]``) are the usual way to hold JSON and
are not flagged; a bad value in one is still caught, boundary by boundary, at run time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import TypeAdapter

_WRAPPERS = ("default", "nullable", "lax-or-strict", "json-or-python", "definitions")


def _unwrap(schema: Mapping[str, Any], refs: Mapping[str, Any]) -> Mapping[str, Any]:
    """A field's schema without defaults, Optional and references, as far as they go."""
    seen: set[str] = set()
    while True:
        kind = schema.get("type")
        ref = str(schema.get("schema_ref", ""))
        if kind == "definition-ref" and ref in refs and ref not in seen:
            seen.add(ref)
            schema = refs[ref]
        elif kind in _WRAPPERS and isinstance(schema.get("schema"), Mapping):
            schema = schema["schema"]
        else:
            return schema


def _fields(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    inner = schema.get("schema")
    if schema.get("type") == "dataclass" and isinstance(inner, Mapping):
        for f in inner.get("fields", []):
            yield f["name"], f["schema"]
    elif schema.get("type") == "model" and isinstance(inner, Mapping):
        for name, f in inner.get("fields", {}).items():
            yield name, f["schema"]
    elif schema.get("type") == "typed-dict":
        for name, f in schema.get("fields", {}).items():
            yield name, f["schema"]


def _collect_refs(schema: Any, refs: dict[str, Any]) -> None:
    if isinstance(schema, Mapping):
        if "ref" in schema:
            refs[schema["ref"]] = schema
        for key, value in schema.items():
            if key not in ("cls", "metadata", "default", "config"):
                _collect_refs(value, refs)
    elif isinstance(schema, list):
        for item in schema:
            _collect_refs(item, refs)


def unsafe_fields(adapter: TypeAdapter[Any]) -> list[tuple[str, str]]:
    """``(field path, why)`` for each field of a state type that a checkpoint cannot hold as it is."""
    refs: dict[str, Any] = {}
    _collect_refs(adapter.core_schema, refs)
    found: list[tuple[str, str]] = []
    visiting: set[int] = set()

    def walk(schema: Mapping[str, Any], path: str) -> None:
        node = _unwrap(schema, refs)
        if id(node) in visiting:
            return
        visiting.add(id(node))
        kind = node.get("type")
        if kind == "is-instance":
            found.append((path, f"is typed as the arbitrary class {node['cls'].__qualname__}"))
        elif kind == "any" and path:
            found.append((path, "is typed Any (or object)"))
        for name, field_schema in _fields(node):
            walk(field_schema, f"{path}.{name}" if path else name)
        visiting.discard(id(node))

    walk(adapter.core_schema, "")
    return found
