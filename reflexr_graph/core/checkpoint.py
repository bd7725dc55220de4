"""The checkpoint format (version 1) and how a saved one is read back, or discarded.

A checkpoint holds the graph state, the graph's inputs and the next task (node id,
inputs and fork stack), or the output once the graph has finished. It is validated as
one pydantic model; whatever does not fit is discarded with a reason and the run starts
over, as any at-least-once retry may. Nothing malformed raises out of ``decode``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from reflexr_graph.core import invalid
from reflexr_graph.core.pg import ForkStackItem, NodeID, NodeRunID
from reflexr_graph.core.readback import Codec
from reflexr_graph.errors import Kind, ReflexrError

FORMAT_VERSION = 1


class DiscardReason(StrEnum):
    FORMAT = "format"
    GRAPH_CHANGED = "graph_changed"
    UNTYPED = "untyped"
    INVALID = "invalid"


class SavedForkItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fork_id: str
    node_run_id: str
    thread_index: int


class SavedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: str
    inputs: Any
    fork_stack: Any


class CheckpointV1(BaseModel):
    """The envelope. Typed parts (state, inputs, fork stack, next inputs) are checked against the graph.

    ``inputs_ref == "run"`` says the graph's inputs are not repeated here: they are the run's
    recorded inputs, written once when the run was enqueued. A checkpoint that holds its own
    ``inputs`` (every one written before that field existed) resumes as it always did.

    ``records_fingerprint`` is set only on a checkpoint that ``upgrade --resume-compatible`` moved
    to another version of the graph: the records of work finished since it (the memo) are keyed
    by the old version's fingerprint, and the attempt that resumes from it looks them up so.
    """

    model_config = ConfigDict(extra="forbid")
    format: Literal[1]
    graph: str
    fingerprint: str
    seq: int
    state: Any
    inputs: Any
    inputs_ref: Literal["run"] | None = None
    next: SavedTask | None = None
    finished: bool = False
    output: Any = None
    records_fingerprint: str | None = None


_FORK_STACK: TypeAdapter[list[SavedForkItem]] = TypeAdapter(list[SavedForkItem])


@dataclass(frozen=True)
class Discarded:
    reason: DiscardReason
    error: str | None = None
    seq: int = 0


@dataclass(frozen=True)
class Restored:
    """A checkpoint that validated against the graph as it is now."""

    seq: int
    state: Any
    inputs: Any
    finished: bool
    output: Any
    output_json: Any
    node_id: str | None
    node_inputs: Any
    fork_stack: list[ForkStackItem]
    records_fingerprint: str | None = None
    """The fingerprint the records since this checkpoint are keyed by, when another version of the
    graph wrote them (an upgraded run); None: this graph's."""


class _Invalid(ReflexrError):
    """A part of a checkpoint does not validate; the checkpoint is discarded, saying where."""

    error_kind = Kind.INVALID


def _load(codec: Codec, part: str, value: Any) -> Any:
    try:
        return codec.load(value)
    except ValidationError as exc:
        raise _Invalid(invalid.describe(exc, under=(part,))) from None


@dataclass(frozen=True)
class CheckpointCodec:
    """Encodes and decodes checkpoints for one graph."""

    graph_name: str
    fingerprint: str
    state: Codec
    inputs: Codec
    output: Codec
    node_codec: Callable[[str], Codec | None]

    def encode(
        self,
        *,
        seq: int,
        state: str = "null",
        inputs: str | None = None,
        next_task: tuple[str, str, list[ForkStackItem]] | None = None,
        output: str = "null",
        finished: bool = False,
    ) -> str:
        """A checkpoint's JSON text, from parts already written as JSON text by ``Codec.dump``.

        The parts are spliced in rather than parsed and dumped again: on the hot path, a
        state is serialized once per boundary. ``inputs=None`` refers to the run's recorded
        inputs instead of repeating them: a 10 MB input is stored once, not per checkpoint.
        """
        head = f'{self._head},"seq":{int(seq)},"finished":{"true" if finished else "false"}'
        nxt = "null"
        if next_task is not None:
            node_id, node_inputs, stack = next_task
            stack_json = _fork_stack_json(tuple(stack))
            nxt = f'{{"node_id":{json.dumps(node_id)},"inputs":{node_inputs},"fork_stack":{stack_json}}}'
        inputs_part = '"inputs":null,"inputs_ref":"run"' if inputs is None else f'"inputs":{inputs}'
        return f'{head},"state":{state},{inputs_part},"next":{nxt},"output":{output}}}'

    @cached_property
    def _head(self) -> str:
        """The envelope's constant start, written once per graph rather than per checkpoint."""
        fixed = {"format": FORMAT_VERSION, "graph": self.graph_name, "fingerprint": self.fingerprint}
        return json.dumps(fixed, separators=(",", ":"))[:-1]

    def decode(self, payload: str | bytes, run_inputs: Any = None) -> Restored | Discarded:
        """The checkpoint as the graph is now, or why it is discarded; ``run_inputs`` are the run's
        recorded inputs (parsed JSON), which a checkpoint with ``inputs_ref`` resumes with."""
        try:
            doc = CheckpointV1.model_validate_json(payload)
        except ValidationError:
            return Discarded(DiscardReason.FORMAT, seq=_loose_seq(payload))
        if doc.fingerprint != self.fingerprint or doc.graph != self.graph_name:
            return Discarded(DiscardReason.GRAPH_CHANGED, seq=doc.seq)
        if not doc.finished and doc.next is None:
            return Discarded(DiscardReason.FORMAT, seq=doc.seq)
        node_codec = self.node_codec(doc.next.node_id) if doc.next is not None and not doc.finished else None
        if doc.next is not None and not doc.finished and node_codec is None:
            return Discarded(DiscardReason.UNTYPED, seq=doc.seq)
        try:
            return self._restore(doc, node_codec, run_inputs)
        except _Invalid as exc:
            return Discarded(DiscardReason.INVALID, str(exc), seq=doc.seq)

    def _restore(self, doc: CheckpointV1, node_codec: Codec | None, run_inputs: Any) -> Restored:
        if doc.finished:
            output = _load(self.output, "output", doc.output)
            return Restored(doc.seq, None, None, True, output, doc.output, None, None, [])
        state = _load(self.state, "state", doc.state)
        inputs = _load(self.inputs, "inputs", run_inputs if doc.inputs_ref == "run" else doc.inputs)
        assert doc.next is not None and node_codec is not None
        try:
            stack = _FORK_STACK.validate_python(doc.next.fork_stack)
        except ValidationError as exc:
            raise _Invalid(invalid.describe(exc, under=("next", "fork_stack"))) from None
        node_inputs = _load(node_codec, "next.inputs", doc.next.inputs)
        fork_stack = [
            ForkStackItem(NodeID(i.fork_id), NodeRunID(i.node_run_id), i.thread_index) for i in stack
        ]
        return Restored(
            doc.seq, state, inputs, False, None, None, doc.next.node_id, node_inputs, fork_stack,
            doc.records_fingerprint,
        )  # fmt: skip


def _loose_seq(payload: str | bytes) -> int:
    """The seq of a checkpoint that failed validation, if it has a readable one, so numbering goes on."""
    try:
        seq = json.loads(payload).get("seq", 0)
    except Exception:
        return 0
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


@lru_cache(maxsize=256)
def _fork_stack_json(stack: tuple[ForkStackItem, ...]) -> str:
    # A run's tasks share few fork stacks (a chain's steps all have the start's): write each once.
    return json.dumps(fork_stack_doc(list(stack)), separators=(",", ":"))


def fork_stack_doc(stack: list[ForkStackItem]) -> list[dict[str, Any]]:
    return [
        {"fork_id": i.fork_id, "node_run_id": i.node_run_id, "thread_index": i.thread_index} for i in stack
    ]


def prefix_fork_stack(stack: list[ForkStackItem], resume_seq: int) -> list[ForkStackItem]:
    """Prefix node-run ids with the resume counter: a new run numbers its node runs afresh.

    Earlier prefixes are kept (``r3/r2/task:1``), so ids from different resumes never meet.
    """
    return [
        ForkStackItem(i.fork_id, NodeRunID(f"r{resume_seq}/{i.node_run_id}"), i.thread_index) for i in stack
    ]
