"""Whether a stored checkpoint would resume under a graph as the code defines it now (G9).

A checkpoint saved by another version of a graph (another fingerprint) still fits this one when
its next node exists and reads the saved inputs as its input type, its state validates as this
graph's state type, the graph's inputs as its input type, and every fork on its fork stack is
still a fork (or the start). Otherwise the run would start over. ``check-checkpoints`` asks this
before a deploy, as Temporal's replay test asks of histories; ``upgrade --resume-compatible`` asks
it of each run it moves, and :func:`rebase` writes a compatible checkpoint over to the new graph.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from reflexr_graph.core.action import GraphAction
from reflexr_graph.core.checkpoint import CheckpointV1, Discarded, DiscardReason
from reflexr_graph.core.pg import Kind

FORK_KINDS = (Kind.FORK, Kind.START)


@dataclass(frozen=True)
class Verdict:
    """What this graph would do with one stored checkpoint."""

    resumes: bool
    reason: str
    """Why, in a few words (never a state or input value)."""


def judge(action: GraphAction, payload: str | None, run_inputs_json: str | None = None) -> Verdict:
    """Would ``action`` resume from ``payload`` (a checkpoint's JSON; None: the run has none yet)?"""
    if payload is None:
        return Verdict(True, "no checkpoint yet: it starts from its first step either way")
    try:
        doc = CheckpointV1.model_validate_json(payload)
    except ValidationError:
        return Verdict(False, "not a checkpoint of format 1")
    if doc.graph != action.name:
        return Verdict(False, f"saved by graph {doc.graph!r}")
    if doc.finished:
        return Verdict(True, "finished: its output is kept")
    if doc.next is None:
        return Verdict(False, "no next task")
    node = doc.next.node_id
    if node not in action.kinds:
        return Verdict(False, f"its next node {node!r} no longer exists")
    forks = [item.get("fork_id") for item in doc.next.fork_stack or [] if isinstance(item, dict)]
    gone = [f for f in forks if action.kinds.get(str(f)) not in FORK_KINDS]
    if gone:
        return Verdict(False, f"its fork stack names {gone[0]!r}, no longer a fork")
    # The same envelope check the worker makes, with the checkpoint's own fingerprint accepted.
    codec = dataclasses.replace(action.checkpoints, fingerprint=doc.fingerprint)
    restored = codec.decode(payload, _parsed(run_inputs_json))
    if isinstance(restored, Discarded):
        return Verdict(False, _why(restored, node))
    same = doc.fingerprint == action.fingerprint
    return Verdict(True, "same graph version" if same else f"compatible: resumes at {node!r}")


def rebase(action: GraphAction, payload: str) -> str:
    """The checkpoint ``payload`` (one :func:`judge` let resume) as ``action``'s own: its fingerprint
    is the new graph's, and ``records_fingerprint`` keeps the one the records since it are keyed by
    (the records of work finished since the checkpoint stay findable where step, branch and
    inputs are unchanged)."""
    doc = CheckpointV1.model_validate_json(payload)
    keyed_by = doc.records_fingerprint or doc.fingerprint
    update: dict[str, str | None] = {"fingerprint": action.fingerprint, "records_fingerprint": keyed_by}
    if keyed_by == action.fingerprint:  # moved back to the version that wrote its records
        update["records_fingerprint"] = None
    moved = doc.model_copy(update=update)
    return moved.model_dump_json()


def _parsed(run_inputs_json: str | None) -> Any:
    if not run_inputs_json:
        return None
    try:
        return json.loads(run_inputs_json)
    except ValueError:
        return None


def _why(discarded: Discarded, node: str) -> str:
    if discarded.reason is DiscardReason.UNTYPED:
        return f"the input type of {node!r} is not known"
    if discarded.reason is DiscardReason.INVALID:
        return f"a saved value no longer validates ({discarded.error})"
    return f"discarded ({discarded.reason.value})"
