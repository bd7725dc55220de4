"""RedisStore's public surface, pinned: every public method's name and signature (its parameters,
their kinds, defaults and resolved type hints, and its return type), as they were when the store
was assembled from one mixin per concern. fleet/, client/, cli/, api/ and the tests call these, so
the table of operations that replaced the mixins (store/operation.py) must keep each one as it was.
And no concern mixin is left: RedisStore is the executor (StoreBase) plus its table.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

from reflexr_graph.store import RedisStore
from reflexr_graph.store.base import StoreBase

SURFACE: dict[str, tuple[str, ...]] = {
    "ack_due": ("self", "run_id: str", "score: float", "-> bool"),
    "acquire_limit": (
        "self",
        "ctx: AttemptContext",
        "request: LimitRequest",
        "slot_ttl_ms: int (keyword-only)",
        "-> Grant",
    ),
    "answer": ("self", "request: Command | Eval | Batch | Scan | Publish | Envelope | Layout", "-> Any"),
    "append_stream": (
        "self",
        "ctx: AttemptContext",
        "items: Sequence[Emission]",
        "after: int",
        "max_items: int = 10000 (keyword-only)",
        "-> int",
    ),
    "bump_due": ("self", "run_id: str", "delay_ms: int", "-> bool"),
    "call_retried": (
        "self",
        "ctx: AttemptContext",
        "node: str (keyword-only)",
        "call: str (keyword-only)",
        "try_number: int (keyword-only)",
        "error_type: str (keyword-only)",
        "delay_ms: int (keyword-only)",
        "-> NoneType",
    ),
    "cancel": ("self", "run_id: str", "now: bool = False (keyword-only)", "-> RunInfo"),
    "checkpoint_info": ("self", "run_id: str", "-> dict[str, Any] | None"),
    "checkpoints": ("self", "run_id: str", "-> list[CheckpointInfo]"),
    "child_output": ("self", "child_id: str", "-> str | None"),
    "children_of": ("self", "run_id: str", "-> dict[str, ChildOutcome | None]"),
    "claim": (
        "self",
        "run_id: str",
        "token: str",
        "lease_ttl_ms: int (keyword-only)",
        "graph: str = '' (keyword-only)",
        "idempotency_key: str | None = None (keyword-only)",
        "worker: str = '' (keyword-only)",
        "version: str = '' (keyword-only)",
        "newest: str = '' (keyword-only)",
        "-> Claim",
    ),
    "close": ("self", "-> NoneType"),
    "create_run": (
        "self",
        "run_id: str",
        "graph: str (keyword-only)",
        "inputs_json: str (keyword-only)",
        "state_json: str | None = None (keyword-only)",
        "idempotency_key: str | None = None (keyword-only)",
        "max_attempts: int (keyword-only)",
        "dispatch_grace_ms: int (keyword-only)",
        "trace_context: str = '' (keyword-only)",
        "fork: ForkSeed | None = None (keyword-only)",
        "-> tuple[str, bool]",
    ),
    "dead_letter": (
        "self",
        "run_id: str",
        "reason: str (keyword-only)",
        "error_type: str (keyword-only)",
        "message: str (keyword-only)",
        "graph: str = '' (keyword-only)",
        "inputs_json: str = '' (keyword-only)",
        "state_json: str | None = None (keyword-only)",
        "idempotency_key: str | None = None (keyword-only)",
        "max_attempts: int = 1 (keyword-only)",
        "-> bool",
    ),
    "dead_letters": (
        "self",
        "graph: str | None = None (keyword-only)",
        "reason: str | None = None (keyword-only)",
        "limit: int = 1000 (keyword-only)",
        "-> list[RunInfo]",
    ),
    "dispatch_of": ("self", "run_ids: Sequence[str]", "-> dict[str, DueTarget]"),
    "do": (
        "self",
        "op: Generator[Command | Eval | Batch | Scan | Publish | Envelope | Layout, Any, ~T]",
        "-> ~T",
    ),
    "due": (
        "self",
        "now_ms: int | None = None",
        "limit: int = 100 (keyword-only)",
        "-> list[tuple[str, float]]",
    ),
    "events": (
        "self",
        "run_id: str",
        "after: str = '0-0'",
        "block_ms: int | None = None",
        "count: int | None = None (keyword-only)",
        "-> list[RunEvent]",
    ),
    "fail": (
        "self",
        "ctx: AttemptContext",
        "error_type: str (keyword-only)",
        "message: str (keyword-only)",
        "traceback: str | None (keyword-only)",
        "reason: str (keyword-only)",
        "permanent: bool (keyword-only)",
        "retry_delay_ms: int (keyword-only)",
        "counted: bool = True (keyword-only)",
        "notes: Notes = Notes(skipped=0, skip_kinds='', reused_steps=0, reused_calls=0) (keyword-only)",
        "-> str",
    ),
    # Issue 36: the store's five settings (retention, bounds, codec) are one value, StoreOptions.
    "from_url": (
        "url: str",
        "options: StoreOptions = StoreOptions(run_retention_s=604800, dead_retention_s=2592000, "
        "max_interruptions=20, checkpoint_history=100, codec=<PayloadCodec object>) (keyword-only)",
        "**client_kw: Any",
        "-> Self",
    ),
    "get": ("self", "run_id: str", "-> RunInfo"),
    "graph_of": ("self", "run_id: str", "-> str | None"),
    "handle": ("self", "request: Command | Eval | Batch | Scan | Publish | Envelope | Layout", "-> Any"),
    "held_for_version": ("self", "graph: str", "version: str", "limit: int", "-> list[str]"),
    "held_versions": ("self", "-> dict[tuple[str, str], int]"),
    "hold_unserved": (
        "self",
        "run_id: str",
        "grace_ms: int (keyword-only)",
        "recheck_ms: int (keyword-only)",
        "message: str (keyword-only)",
        "-> Unserved",
    ),
    "hold_version": (
        "self",
        "run_id: str",
        "graph: str",
        "version: str",
        "grace_ms: int (keyword-only)",
        "recheck_ms: int (keyword-only)",
        "-> VersionHold",
    ),
    "keep_clock": ("self", "-> NoneType"),
    "limit_usage": ("self", "-> list[LimitUsage]"),
    "list_runs": (
        "self",
        "status: Status | str | None = None (keyword-only)",
        "graph: str | None = None (keyword-only)",
        "limit: int = 50 (keyword-only)",
        "-> list[RunInfo]",
    ),
    "live_versions": ("self", "graph: str", "-> dict[str, list[str]]"),
    "live_worker_count": ("self", "-> int"),
    "live_workers": ("self", "-> list[WorkerInfo]"),
    "load_checkpoint": ("self", "run_id: str", "-> str | None"),
    "load_records": ("self", "run_id: str", "-> dict[str, str]"),
    "make_child": (
        "self",
        "ctx: AttemptContext",
        "request: ChildRequest",
        "dispatch_grace_ms: int (keyword-only)",
        "-> tuple[str, bool]",
    ),
    "nudge_reaper": ("self", "-> NoneType"),
    "open_event": (
        "self",
        "ctx: AttemptContext",
        "token: str (keyword-only)",
        "entry_json: str (keyword-only)",
        "name: str (keyword-only)",
        "-> NoneType",
    ),
    "ping": ("self", "-> NoneType"),
    "postpone_due": ("self", "run_ids: Iterable[str]", "delay_ms: int", "-> NoneType"),
    "preload_scripts": ("self", "-> NoneType"),
    "prune": (
        "self",
        "now_ms: int | None = None",
        "limit: int = 1000 (keyword-only)",
        "found: dict[str, list[str]] | None = None (keyword-only)",
        "-> int",
    ),
    "prune_tag_indexes": ("self", "cursors: dict[int, int]", "limit: int = 200 (keyword-only)", "-> int"),
    "publish_versions": (
        "self",
        "entries: Iterable[VersionEntry]",
        "graphs: Iterable[str]",
        "reconcile: bool = False (keyword-only)",
        "-> NoneType",
    ),
    "published_versions": ("self", "graph: str", "-> list[VersionEntry]"),
    "purge": ("self", "run_id: str", "-> bool"),
    "read_checkpoint": ("self", "run_id: str", "seq: int", "-> SavedCheckpoint"),
    "reap": (
        "self",
        "now_ms: int | None = None",
        "limit: int = 100 (keyword-only)",
        "outage: tuple[int, int] | None = None (keyword-only)",
        "lapsed: list[str] | None = None (keyword-only)",
        "lease_ttl_ms: int | None = None (keyword-only)",
        "-> list[str]",
    ),
    "reaper_nudges": ("self", "-> PubSub"),
    "reaper_tick": (
        "self",
        "owner: str",
        "lock_ttl_ms: int",
        "now_ms: int | None = None",
        "shards: Iterable[int] | None = None (keyword-only)",
        "idle_ms: int | None = None (keyword-only)",
        "margin_ms: int | None = None (keyword-only)",
        "prune: bool = True (keyword-only)",
        "-> TickReply",
    ),
    "release": ("self", "ctx: AttemptContext", "-> str"),
    "release_lock": ("self", "owner: str", "shards: Iterable[int] | None = None", "-> bool"),
    "release_slot": ("self", "key: str", "member: str", "-> NoneType"),
    "renew_lease": ("self", "run_id: str", "token: str", "lease_ttl_ms: int (keyword-only)", "-> Lease"),
    "renew_slots": ("self", "held: Mapping[str, str]", "slot_ttl_ms: int (keyword-only)", "-> NoneType"),
    "replay": (
        "self",
        "run_id: str",
        "from_start: bool = False (keyword-only)",
        "from_seq: int | None = None (keyword-only)",
        "-> RunInfo",
    ),
    "reschedule_due": (
        "self",
        "run_id: str",
        "score: float",
        "base_ms: int (keyword-only)",
        "cap_ms: int (keyword-only)",
        "-> int",
    ),
    "sample_clock": ("self", "-> Sample | None"),
    "save_checkpoint": (
        "self",
        "ctx: AttemptContext",
        "boundary: Boundary",
        "returning: Sequence[tuple[str, str]] = () (keyword-only)",
        "via: StepWriter | None = None (keyword-only)",
        "-> bool",
    ),
    "save_record": (
        "self",
        "ctx: AttemptContext",
        "record: Record",
        "returning: Sequence[tuple[str, str]] = () (keyword-only)",
        "via: StepWriter | None = None (keyword-only)",
        "-> NoneType",
    ),
    "schedule_nudges": ("self", "-> PubSub"),
    "serving": ("self", "graphs: Sequence[str]", "-> dict[str, list[str]]"),
    "settle_event": (
        "self",
        "ctx: AttemptContext",
        "token: str (keyword-only)",
        "answer_json: str (keyword-only)",
        "-> str",
    ),
    "signal": (
        "self",
        "run_id: str",
        "name: str",
        "value_json: str",
        "dispatch_grace_ms: int (keyword-only)",
        "message: QueuedMessage | None = None (keyword-only)",
        "-> tuple[SignalOutcome, str]",
    ),
    "stored_checkpoints": (
        "self",
        "runs: Sequence[tuple[str, str, str | None]]",
        "-> list[StoredCheckpoint]",
    ),
    "subscribe": ("self", "*channels: str", "-> PubSub"),
    "succeed": (
        "self",
        "ctx: AttemptContext",
        "output_json: str",
        "checkpoint: str = '' (keyword-only)",
        "seq: int = 0 (keyword-only)",
        "notes: Notes = Notes(skipped=0, skip_kinds='', reused_steps=0, reused_calls=0) (keyword-only)",
        "-> bool",
    ),
    "tell_parent": ("self", "child_id: str", "-> tuple[str, str] | None"),
    "trace_context": ("self", "run_id: str", "-> str"),
    "traceback": ("self", "run_id: str", "-> str | None"),
    "unhold_version": ("self", "graph: str", "version: str", "generation: int", "-> bool"),
    "wait": (
        "self",
        "ctx: AttemptContext",
        "field: str (keyword-only)",
        "signal: str (keyword-only)",
        "wake_at_ms: int | None (keyword-only)",
        "waited_ms: int = 0 (keyword-only)",
        "-> WaitResult",
    ),
    "wait_for_children": (
        "self",
        "ctx: AttemptContext",
        "children: Sequence[str]",
        "waiting_for: str",
        "-> list[str] | None",
    ),
    "wake_version": (
        "self",
        "run_id: str",
        "graph: str",
        "version: str",
        "due_ms: int (keyword-only)",
        "-> bool",
    ),
    "worker_alive": ("self", "name: str", "ttl_ms: int (keyword-only)", "-> bool"),
    "worker_beat": (
        "self",
        "info: WorkerInfo",
        "ttl_ms: int (keyword-only)",
        "described_ms: int | None = None (keyword-only)",
        "sets_ms: int | None = None (keyword-only)",
        "trim: bool = True (keyword-only)",
        "-> NoneType",
    ),
    "worker_leave": ("self", "info: WorkerInfo", "-> NoneType"),
    "write_step": (
        "self",
        "name: str",
        "script_keys: Sequence[str]",
        "args: Sequence[str | int | float]",
        "returning: Sequence[tuple[str, str]] = ()",
        "-> Any",
    ),
}
"""Public method -> its signature, hints resolved (generated from main before the mixins went)."""

PROPERTIES = {"client", "max_block_ms", "scripts"}

CONCERNS = (
    "attempts",
    "children",
    "history",
    "interventions",
    "limits",
    "reads",
    "recovery",
    "streams",
    "versions",
    "waits",
    "workers",
)
"""The concern modules whose mixins RedisStore was assembled from; each now holds operations."""


def rendered(method: Callable[..., Any]) -> tuple[str, ...]:
    """``method``'s parameters, then its return type (after ``->``), each with its type hint resolved
    (a string annotation and the type it names read the same) and named without its module."""
    signature = inspect.signature(method)
    hints = typing.get_type_hints(method)
    params = [
        _parameter(p.replace(annotation=hints.get(p.name, p.empty))) for p in signature.parameters.values()
    ]
    return (
        *params,
        "-> " + _short(inspect.formatannotation(hints.get("return", signature.return_annotation))),
    )


def _parameter(param: inspect.Parameter) -> str:
    marks: dict[inspect._ParameterKind, str] = {
        param.KEYWORD_ONLY: " (keyword-only)",
        param.POSITIONAL_ONLY: " (positional-only)",
    }
    return _short(str(param)) + marks.get(param.kind, "")


def _short(text: str) -> str:
    """``text`` without module paths (``reflexr_graph.model.RunInfo``: ``RunInfo``) or addresses."""
    text = re.sub(r" at 0x[0-9a-f]+", "", text)  # a default object's address differs per process
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Za-z_])", "", text)


def surface() -> dict[str, tuple[str, ...]]:
    public = sorted(name for name in dir(RedisStore) if not name.startswith("_"))
    return {name: rendered(getattr(RedisStore, name)) for name in public if name not in PROPERTIES}


def test_every_public_method_keeps_its_name_and_signature() -> None:
    assert surface() == SURFACE


def test_the_properties_stay() -> None:
    public = {name for name in dir(RedisStore) if not name.startswith("_")}
    assert {name for name in public if isinstance(inspect.getattr_static(RedisStore, name), property)} == (
        PROPERTIES
    )


def test_no_concern_is_a_mixin_of_the_store() -> None:
    """RedisStore is the executor (StoreBase) and its table: no class of a concern module is in its MRO."""
    concerns = {f"reflexr_graph.store.{name}" for name in CONCERNS}
    assert [cls.__qualname__ for cls in RedisStore.__mro__ if cls.__module__ in concerns] == []
    assert RedisStore.__mro__[1] is StoreBase


def test_no_concern_module_holds_a_part_of_the_store() -> None:
    """Nor does a concern module define a StoreBase subclass that a store could be assembled from."""
    modules = [importlib.import_module(f"reflexr_graph.store.{name}") for name in CONCERNS]
    parts = [
        f"{module.__name__}.{cls.__name__}"
        for module in modules
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, StoreBase) and cls.__module__ == module.__name__
    ]
    assert parts == []
