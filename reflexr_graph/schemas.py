"""Published graph schemas: workers write them to Redis, clients read and validate against them.

A worker publishes, for each graph it runs, the graph's name, fingerprint, the JSON Schemas
of its inputs, state and output, and its Mermaid diagram, as one JSON value per graph in
the hash ``rg:graphs``. A client then validates inputs before anything is queued, without
importing the graph's code. Validation errors name each failing location and why, never
the value found there (G6).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import redis
from pydantic import BaseModel, ConfigDict, field_validator

from reflexr_graph import clock, errors
from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.invalid import format_loc
from reflexr_graph.core.policy import DEFAULT_MAX_ATTEMPTS
from reflexr_graph.core.words import plural
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Op, batch, cmd
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.workers import live_servers, served_reads

if TYPE_CHECKING:
    # Imported where a client validates (_validator, check), not at import: a worker, which
    # publishes schemas but validates none, then starts without it (about 0.1 s of CPU a start).
    import jsonschema

GRAPHS = keys.GRAPHS
"""Hash: graph name -> JSON of its :class:`GraphSchema`. (Belongs in ``store/keys.py``.)"""


def run_max_attempts(action: GraphAction | None, default: int) -> int:
    """The attempt budget of a graph's runs; the one rule every run record is made by.

    The action's own ``GraphAction(max_attempts=...)`` (or ``retry=RetryPolicy(max_attempts=...)``)
    when it sets one, else ``default``: the ``REFLEXR_MAX_ATTEMPTS`` of the process that publishes
    the graph (a worker, or ``reflexr-graph publish``). The number is published in the graph's
    entry, and every new run takes it from there, whoever creates its record: a Client's enqueue
    or fork, or a worker taking a foreign ``send_task`` message. A producer's own
    ``REFLEXR_MAX_ATTEMPTS`` plays no part. Only a run of a graph that nobody published yet
    takes the recording worker's setting.
    """
    if action is not None and action.max_attempts is not None:
        return action.max_attempts
    return default


class GraphSchema(BaseModel):
    """What a worker publishes about one graph."""

    model_config = ConfigDict(frozen=True)

    name: str
    fingerprint: str
    inputs: dict[str, Any]
    state: dict[str, Any]
    output: dict[str, Any]
    mermaid: str
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    """The attempt budget of the graph's new runs (:func:`run_max_attempts`)."""
    published_at: float = 0.0
    signals: dict[str, dict[str, Any]] = {}
    """Signal name -> JSON Schema of its value, for each signal the graph's steps may wait for."""

    @field_validator("max_attempts", mode="before")
    @classmethod
    def _unset_is_default(cls, value: object) -> object:
        # Entries published before the number was always written say null; a worker of this
        # version rewrites them when it starts.
        return DEFAULT_MAX_ATTEMPTS if value is None else value

    @classmethod
    def from_action(
        cls, action: GraphAction, default_max_attempts: int = DEFAULT_MAX_ATTEMPTS
    ) -> GraphSchema:
        """The entry a process publishes for ``action``; ``default_max_attempts`` is its
        ``REFLEXR_MAX_ATTEMPTS`` (see :func:`run_max_attempts`)."""
        schemas = action.schemas()
        return cls(
            name=action.name,
            fingerprint=action.fingerprint,
            inputs=schemas["inputs"],
            state=schemas["state"],
            output=schemas["output"],
            mermaid=action.mermaid(),
            max_attempts=run_max_attempts(action, default_max_attempts),
            published_at=clock.now_ms() / 1000,
            signals=schemas["signals"],
        )

    def same_as(self, other: GraphSchema) -> bool:
        """Whether the two entries say the same, whenever each was published."""
        return self.model_dump(exclude={"published_at"}) == other.model_dump(exclude={"published_at"})


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def published_entries(entries: Sequence[GraphSchema]) -> Op[list[str]]:
    """Write each graph's entry; returns the names whose entry was written.

    An entry is rewritten only when what it says changed (fingerprint, schemas, signals,
    max_attempts...), so restarting a fleet of identical workers does not churn the hash.
    """
    current = (yield cmd("hmget", GRAPHS, [e.name for e in entries])) if entries else []
    changed = [
        entry
        for entry, raw in zip(entries, current, strict=True)
        if raw is None or not GraphSchema.model_validate_json(_text(raw)).same_as(entry)
    ]
    if changed:
        yield cmd("hset", GRAPHS, mapping={e.name: e.model_dump_json() for e in changed})
    return [e.name for e in changed]


def publish(
    store_or_redis: RedisStore | redis.Redis,
    actions: Iterable[GraphAction],
    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> list[str]:
    """Publish each graph's schema entry (see :func:`published_entries`); ``default_max_attempts``
    is the publisher's ``REFLEXR_MAX_ATTEMPTS`` (:func:`run_max_attempts`)."""
    entries = [GraphSchema.from_action(a, default_max_attempts) for a in actions]
    return _store(store_or_redis).do(published_entries(entries))


def _store(store_or_redis: RedisStore | redis.Redis) -> RedisStore:
    return store_or_redis if isinstance(store_or_redis, RedisStore) else RedisStore(store_or_redis)


def _unknown(name: str) -> Op[errors.UnknownGraph]:
    known = [g.name for g in (yield from published_graphs())]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
    return errors.UnknownGraph(
        f"no graph named {name!r} is published ({hint}published: {', '.join(known) or 'none yet'}); "
        "check the name, start a worker that loads it (REFLEXR_GRAPHS), or publish its schema from a "
        "deploy step with `reflexr-graph publish module:attribute`"
    )


def published_graph(name: str) -> Op[GraphSchema]:
    """The published entry of graph ``name``; UnknownGraph when it was never published."""
    raw = yield cmd("hget", GRAPHS, name)
    if raw is None:
        raise (yield from _unknown(name))
    return GraphSchema.model_validate_json(_text(raw))


def published_with_workers(name: str) -> Op[tuple[GraphSchema, list[str]]]:
    """The published entry of ``name`` and the live workers that serve it, in one round trip."""
    raw, *served = yield batch([cmd("hget", GRAPHS, name), *served_reads([keys.served(name)])])
    if raw is None:
        raise (yield from _unknown(name))
    (workers,) = live_servers(served)
    return GraphSchema.model_validate_json(_text(raw)), workers


def published_graphs() -> Op[list[GraphSchema]]:
    """Every published graph, by name."""
    raw: dict[Any, Any] = yield cmd("hgetall", GRAPHS)
    entries = [GraphSchema.model_validate_json(_text(v)) for v in raw.values()]
    return sorted(entries, key=lambda e: e.name)


def load(store_or_redis: RedisStore | redis.Redis, name: str) -> GraphSchema:
    """See :func:`published_graph`."""
    return _store(store_or_redis).do(published_graph(name))


def list_graphs(store_or_redis: RedisStore | redis.Redis) -> list[GraphSchema]:
    """See :func:`published_graphs`."""
    return _store(store_or_redis).do(published_graphs())


# -- validation ------------------------------------------------------------------------------


def _why(error: jsonschema.ValidationError) -> str:
    """Why ``error`` failed, in words that never quote the instance's value."""
    kind, expected = error.validator, error.validator_value

    def counted(noun: str) -> str:
        return plural(expected, noun) if isinstance(expected, int) else f"{expected} {noun}s"

    simple = {
        "type": f"must be of type {expected}",
        "enum": f"must be one of {json.dumps(expected)}",
        "const": f"must equal {json.dumps(expected)}",
        "minimum": f"must be >= {expected}",
        "maximum": f"must be <= {expected}",
        "exclusiveMinimum": f"must be > {expected}",
        "exclusiveMaximum": f"must be < {expected}",
        "minLength": f"must have at least {counted('character')}",
        "maxLength": f"must have at most {counted('character')}",
        "minItems": f"must have at least {counted('item')}",
        "maxItems": f"must have at most {counted('item')}",
        "pattern": f"must match the pattern {expected!r}",
        "format": f"must be in {expected} format",
        "multipleOf": f"must be a multiple of {expected}",
        "anyOf": "matches none of the allowed types",
        "oneOf": "must match exactly one of the allowed types",
    }
    return simple.get(str(kind), f"fails the {kind!r} check of the schema")


def _errors_of(error: jsonschema.ValidationError, part: str) -> list[dict[str, object]]:
    loc: list[object] = [part, *error.absolute_path]
    instance, expected, schema = error.instance, error.validator_value, error.schema
    if error.validator == "required" and isinstance(instance, dict) and isinstance(expected, list):
        missing = [name for name in expected if name not in instance]
        return [{"loc": [*loc, name], "msg": "is required", "type": "missing"} for name in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        allowed = set(schema.get("properties", {}))
        extra = [name for name in instance if name not in allowed]
        return [{"loc": [*loc, n], "msg": "is not allowed here", "type": "extra"} for n in extra]
    return [{"loc": loc, "msg": _why(error), "type": str(error.validator)}]


_VALIDATORS: dict[tuple[str, str, str], jsonschema.Draft202012Validator] = {}
_VALIDATORS_MAX = 256


def _validator(entry: GraphSchema, part: str, schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """The compiled validator of one part of a published graph, kept while its fingerprint lasts."""
    key = (entry.name, entry.fingerprint, part)
    found = _VALIDATORS.get(key)
    if found is None:
        if len(_VALIDATORS) >= _VALIDATORS_MAX:
            _VALIDATORS.clear()  # graphs are few; a bound keeps redeploys from growing it forever
        import jsonschema

        found = _VALIDATORS[key] = jsonschema.Draft202012Validator(schema)
    return found


def check(
    schema: dict[str, Any], value: Any, part: str, validator: jsonschema.Draft202012Validator | None = None
) -> list[dict[str, object]]:
    """Every way ``value`` fails ``schema``, as ``{"loc", "msg", "type"}`` dicts (no values)."""
    if validator is None:
        import jsonschema

        validator = jsonschema.Draft202012Validator(schema)
    found: list[dict[str, object]] = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path))):
        found.extend(_errors_of(error, part))
    return found


def _refuse(entry: GraphSchema, what: str, found: list[dict[str, object]]) -> None:
    if found:
        detail = "; ".join(f"{format_loc(e['loc'])} {e['msg']}" for e in found)  # type: ignore[arg-type]
        message = f"graph {entry.name!r} rejects {what}: {detail}; fix the listed fields"
        raise errors.InvalidInputs(message, found)


def _state_errors(entry: GraphSchema, state: Any) -> list[dict[str, object]]:
    return check(entry.state, state, "state", _validator(entry, "state", entry.state))


def closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others.

    pydantic leaves ``additionalProperties`` out for a model that ignores extra fields: a value
    given for a field the model lacks is dropped without a word when it loads. Closed, the schema
    refuses it, at its location; a model that allows or forbids extras says so itself and is kept.
    """
    if not isinstance(schema, dict):
        return schema
    found = dict(schema)
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            found[key] = {name: closed(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            found[key] = [closed(sub) for sub in value]
        elif key in _SCHEMA_ONES:
            found[key] = closed(value)
    if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema:
        found["additionalProperties"] = False
    return found


_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONES = frozenset({"items", "additionalProperties", "not"})
"""Where a JSON schema holds other schemas (name -> schema, a list of them, or one); defaults,
examples and enums hold values, which ``closed`` must leave as they are."""


def validate_signal(entry: GraphSchema, name: str, value: Any) -> None:
    """UnknownSignal for a name the graph does not declare; InvalidInputs listing each failing location."""
    schema = entry.signals.get(name)
    if schema is None:
        raise errors.UnknownSignal(graph=entry.name, signal=name, declared=tuple(sorted(entry.signals)))
    found = check(schema, value, "value", _validator(entry, f"signal:{name}", schema))
    _refuse(entry, f"this value of signal {name!r}", found)


def validate(entry: GraphSchema, inputs: Any, state: Any = None) -> None:
    """Raise InvalidInputs listing every failing location of the inputs (and state, if given)."""
    found = check(entry.inputs, inputs, "inputs", _validator(entry, "inputs", entry.inputs))
    if state is not None:
        found += _state_errors(entry, state)
    _refuse(entry, "these inputs", found)


def validate_state(entry: GraphSchema, state: Any) -> None:
    """Raise InvalidInputs listing every failing location of a state (a fork's replacement state).

    Stricter than an enqueued state: a field the state type lacks is refused (``closed``), since
    the state replaces the checkpoint's whole state and a misspelt field would silently be lost.
    """
    schema = closed(entry.state)
    _refuse(entry, "this state", check(schema, state, "state", _validator(entry, "state:closed", schema)))
