"""The keyword arguments of a ``reflexr_graph.run`` message: checked, and turned into a run record.

The contract for producers in any language: ``graph`` (str), ``inputs`` (JSON) and
optionally ``state`` (JSON) and ``idempotency_key`` (str), as keyword arguments. Messages
the Client and the reaper send carry only ``graph``: the run record holds the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reflexr_graph.core.action import NAME_PATTERN, NAME_RULE, GraphAction
from reflexr_graph.core.tracing import current_trace_context
from reflexr_graph.errors import Kind, ReflexrError
from reflexr_graph.fleet.budget import new_run_budget
from reflexr_graph.model import Reason
from reflexr_graph.store import cluster, keys
from reflexr_graph.store.redis_store import RedisStore

KWARGS = ("graph", "inputs", "state", "idempotency_key")
MAX_RUN_ID_LENGTH = keys.MAX_RUN_ID_LENGTH
MAX_KEY_LENGTH = 512


class BadMessage(ReflexrError):
    """The message cannot become a run; it is dead-lettered with ``reason``."""

    error_kind = Kind.INVALID

    def __init__(self, reason: Reason, message: str, *, keep_key: bool = True) -> None:
        super().__init__(message)
        self.reason = reason
        self.keep_key = keep_key
        """Whether the dead letter records the message's idempotency key."""


@dataclass(frozen=True)
class RunMessage:
    """The validated keyword arguments of one ``reflexr_graph.run`` message."""

    graph: str
    has_inputs: bool
    """False for the Client's and the reaper's messages: the inputs are in the run record."""
    inputs: Any
    state: Any
    idempotency_key: str | None
    inputs_json: str
    state_json: str | None


def to_json(value: Any, what: str) -> str:
    """Compact JSON text, or BadMessage: NaN and Infinity are not JSON other languages read."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"{what} is not plain JSON (NaN, Infinity or a non-JSON type); send JSON values",
        ) from None


def _check_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if args:
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"{len(args)} positional argument(s) given; send graph, inputs, state and idempotency_key "
            "as keyword arguments",
        )
    unexpected = sorted(str(k) for k in kwargs if k not in KWARGS)
    if unexpected:
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"unexpected keyword argument(s) {', '.join(unexpected)}; the task takes {', '.join(KWARGS)}",
        )
    graph = kwargs.get("graph")
    if not isinstance(graph, str) or not graph:
        raise BadMessage(Reason.BAD_MESSAGE, "keyword argument 'graph' is missing or not a non-empty string")
    if not NAME_PATTERN.fullmatch(graph):
        # The guard quarantines such a message first (fleet/guard.py); this holds for any other path.
        raise BadMessage(Reason.BAD_MESSAGE, f"keyword argument 'graph' is not a graph name: {NAME_RULE}")
    key = kwargs.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
        raise BadMessage(
            Reason.BAD_MESSAGE,
            f"'idempotency_key' must be a non-empty string of at most {MAX_KEY_LENGTH} characters",
        )


def parse_message(args: tuple[Any, ...], kwargs: dict[str, Any], max_payload_bytes: int = 0) -> RunMessage:
    """Check the message's shape; BadMessage names what is wrong (never a value)."""
    _check_shape(args, kwargs)
    inputs, state = kwargs.get("inputs"), kwargs.get("state")
    inputs_json = to_json(inputs, "'inputs'") if "inputs" in kwargs else ""
    state_json = None if state is None else to_json(state, "'state'")
    for part, text in (("inputs", inputs_json), ("state", state_json or "")):
        if max_payload_bytes and len(text) > max_payload_bytes:
            raise BadMessage(
                Reason.BAD_MESSAGE,
                f"'{part}' is {len(text)} bytes of JSON, above REFLEXR_MAX_PAYLOAD_BYTES "
                f"({max_payload_bytes}); pass a reference to large data instead",
            )
    return RunMessage(
        graph=kwargs["graph"],
        has_inputs="inputs" in kwargs,
        inputs=inputs,
        state=state,
        idempotency_key=kwargs.get("idempotency_key"),
        inputs_json=inputs_json,
        state_json=state_json,
    )


def create_from_message(
    store: RedisStore,
    run_id: str,
    msg: RunMessage,
    action: GraphAction | None,
    default_max_attempts: int,
    dispatch_grace_ms: int,
) -> str:
    """Create the record of a foreign producer's run; returns the run that now owns its key.

    Its attempt budget is the graph's published one, as for a run a Client enqueues
    (``fleet/budget.py``; ``action`` and ``default_max_attempts`` only for a graph nobody
    published). Raises IdempotencyConflict when the key names a run made from other inputs, and
    BadMessage when the message carries no inputs to create a record from.
    """
    if not msg.has_inputs:
        raise BadMessage(
            Reason.BAD_MESSAGE,
            "keyword argument 'inputs' is missing, and no run record exists for this id; a first "
            "message must carry the graph's inputs",
        )
    key = msg.idempotency_key
    if (
        key
        and cluster.is_cluster(store.client)
        and not keys.same_shard(run_id, keys.idem_scope(msg.graph, key))
    ):
        # The key and the run would be in two slots, which one script cannot touch.
        raise BadMessage(
            Reason.BAD_MESSAGE,
            "on a Redis Cluster store, a message with an idempotency key needs a task id in the "
            "key's shard: crc32(task id) mod 64 == crc32('<graph>:<key>') mod 64 "
            "(docs/guide.md#enqueue-from-another-language)",
            keep_key=False,
        )
    owner, _created = store.create_run(
        run_id,
        graph=msg.graph,
        inputs_json=msg.inputs_json,
        state_json=msg.state_json,
        idempotency_key=msg.idempotency_key,
        max_attempts=new_run_budget(store, msg.graph, action, default_max_attempts),
        # If the worker dies before claiming, the reaper sends the run again after this.
        dispatch_grace_ms=dispatch_grace_ms,
        # The producer's trace, as the Celery instrumentation carried it in the message.
        trace_context=current_trace_context(),
    )
    return owner
