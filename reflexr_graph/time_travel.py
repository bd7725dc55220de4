"""Time travel: a run's checkpoints shown to an operator, and new runs forked from them.

Every checkpoint a run keeps (``REFLEXR_CHECKPOINT_HISTORY``) can be read back whole, and can
seed a fork: a new run of the same graph whose first attempt resumes from it, optionally with
its state replaced, or patched (a JSON object merged into the checkpoint's state). Everything
here is decided before anything is written: a checkpoint the fleet would discard on resume
(saved by another version of the graph, by fingerprint) is refused, since the fork would start
over rather than do what was asked, and a new state must validate against the graph's
published state schema, which refuses fields the state type lacks. Errors name locations,
never values; only :func:`detail` returns values, because an operator asked for them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from reflexr_graph import errors, schemas
from reflexr_graph.core.checkpoint import CheckpointV1, DiscardReason
from reflexr_graph.model import CheckpointDetail
from reflexr_graph.store.payload_codec import placeholder_of
from reflexr_graph.store.records import ForkSeed, SavedCheckpoint, request_digest


def document(run_id: str, saved: SavedCheckpoint) -> CheckpointV1:
    """The checkpoint's envelope; StaleCheckpoint when it is not one this version reads, and
    OperationRefused when this process cannot read it (a key it lacks): HTTP 409, not a 500."""
    unreadable = placeholder_of(saved.payload)
    if unreadable is not None:
        raise errors.OperationRefused(
            f"run {run_id}: checkpoint {saved.info.seq} cannot be read here ({unreadable}); set "
            "REFLEXR_PAYLOAD_KEYS (and REFLEXR_PAYLOAD_STORE) as the workers have them"
        )
    try:
        return CheckpointV1.model_validate_json(saved.payload)
    except ValidationError:
        raise errors.StaleCheckpoint(
            run_id=run_id, seq=saved.info.seq, graph=saved.graph, reason=DiscardReason.FORMAT.value
        ) from None


def check_current(run_id: str, saved: SavedCheckpoint, entry: schemas.GraphSchema) -> CheckpointV1:
    """The checkpoint's envelope, if the graph as published now would resume it; else StaleCheckpoint."""
    doc = document(run_id, saved)
    if doc.fingerprint != entry.fingerprint or doc.graph != entry.name:
        raise errors.StaleCheckpoint(
            run_id=run_id, seq=saved.info.seq, graph=saved.graph, reason=DiscardReason.GRAPH_CHANGED.value
        )
    return doc


def _run_inputs(saved: SavedCheckpoint) -> Any:
    try:
        return json.loads(saved.inputs_json)
    except ValueError:
        return saved.inputs_json  # written by a foreign producer as text: shown as it is


def detail(run_id: str, saved: SavedCheckpoint) -> CheckpointDetail:
    """The checkpoint with its values as JSON: the state, the graph inputs, the next task's inputs."""
    doc = document(run_id, saved)
    return CheckpointDetail(
        **saved.info.model_dump(),
        run_id=run_id,
        graph=doc.graph,
        fingerprint=doc.fingerprint,
        state=None if doc.finished else doc.state,
        inputs=_run_inputs(saved) if doc.inputs_ref == "run" else doc.inputs,
        next_inputs=None if doc.finished or doc.next is None else doc.next.inputs,
        output=doc.output if doc.finished else None,
    )


def _finished_has_no_state(run_id: str, seq: int) -> errors.InvalidInputs:
    return errors.InvalidInputs(
        f"checkpoint #{seq} of run {run_id} is the finished one: it holds the output, not a state to "
        "replace; fork from an earlier checkpoint to change the state",
        [
            {
                "loc": ["state"],
                "msg": "cannot be replaced in the finished checkpoint, which holds the output: fork from "
                "an earlier one to change the state",
                "type": "finished",
            }
        ],
    )


def merge(base: Any, patch: Any) -> Any:
    """``patch`` merged into ``base``: objects key by key, recursively; any other value replaces.

    Unlike JSON Merge Patch (RFC 7386), null is a value like any other, not a deletion: a state
    field is set to null, never dropped (a dropped field would silently get its default).
    """
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    return {
        **base,
        **{key: merge(base[key], value) if key in base else value for key, value in patch.items()},
    }


def _one_change(state: Any, patch: Any) -> None:
    def refused(loc: str, msg: str) -> errors.InvalidInputs:
        return errors.InvalidInputs(f"fork {loc} {msg}", [{"loc": [loc], "msg": msg, "type": "fork"}])

    if state is not None and patch is not None:
        raise refused("patch", "cannot be given with state: replace the state, or patch it")
    if patch is not None and not isinstance(patch, dict):
        raise refused("patch", "must be a JSON object of the state fields to change")


def seed(
    run_id: str, saved: SavedCheckpoint, entry: schemas.GraphSchema, state: Any = None, patch: Any = None
) -> ForkSeed:
    """What a fork of ``saved`` is created with: ``state`` (JSON), when not None, replaces its
    state; ``patch`` (a JSON object), when not None, is merged into it (:func:`merge`).

    Raises StaleCheckpoint for a checkpoint of another version of the graph, InvalidInputs for
    both a state and a patch, a state that does not validate against the published schema (a
    field it lacks included), or a change to a finished checkpoint's state.
    """
    _one_change(state, patch)
    doc = check_current(run_id, saved, entry)
    seq = saved.info.seq
    payload = saved.payload
    if state is not None or patch is not None:
        if doc.finished:
            raise _finished_has_no_state(run_id, seq)
        # Only the state changes: every other part is the attempt's own JSON, parsed and written
        # back unchanged (Python's json keeps floats and big integers exact).
        edited = json.loads(payload)
        if patch is not None:
            state = merge(edited["state"], patch)
        schemas.validate_state(entry, state)
        edited["state"] = state
        payload = json.dumps(edited, separators=(",", ":"))
    return ForkSeed(
        source_run_id=run_id,
        seq=seq,
        checkpoint=payload,
        next_node=saved.info.next_node,
        state_edited=state is not None,
        output_json=json.dumps(doc.output, separators=(",", ":")) if doc.finished else None,
        digest=request_digest({"fork": run_id, "seq": seq}, state),
    )
