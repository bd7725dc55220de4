"""Interventions: an operator cancels, replays or purges a run (operations both clients run too)."""

from __future__ import annotations

import logging

from reflexr_graph import clock, errors
from reflexr_graph.model import RunInfo, Status
from reflexr_graph.store import audit, keys
from reflexr_graph.store.children import CHILD_FIELD, children_of, tell_parent
from reflexr_graph.store.contracts import CancelArgs, ReplayArgs
from reflexr_graph.store.history import missing_checkpoint
from reflexr_graph.store.ops import Op, cmd, per_run, snapshot
from reflexr_graph.store.records import pairs_to_map, text
from reflexr_graph.store.settings import StoreSettings

log = logging.getLogger(__name__)


def cancel_run(run_id: str, run_retention_s: int, now: bool = False, by: str = "") -> Op[RunInfo]:
    """Cancel an active or waiting run.

    A queued, retrying or waiting run is cancelled at once. A running one is only marked
    (``cancel_requested``): its attempt learns of it from its next lease renewal or checkpoint,
    lets the step in flight finish, and ends the run cancelled at the next boundary. With
    ``now``, a running run is cancelled at once too: its token is cleared, so its attempt is
    fenced out and its heartbeat interrupts the step with ``CancelledError``.

    A parent's unfinished children are cancelled the same way, and theirs in turn (their ends
    tell it, as any child's end does). ``by`` (who cancels) is recorded on the run's event, and in
    the fleet's audit trail (store/audit.py), which outlives the run.
    """
    args = CancelArgs(run_retention_s, now, by).argv()
    reply = yield from per_run("cancel", run_id, run_id, clock.now_ms(), args)
    info = snapshot(run_id, reply, "only queued, running, retrying or waiting runs can be cancelled")
    yield from audit.record(audit.CANCEL, run_id, by)
    if pairs_to_map(reply[1:]).get("children"):
        yield from cancel_children(run_id, run_retention_s, now, by)
    return info


def cancel_children(run_id: str, run_retention_s: int, now: bool = False, by: str = "") -> Op[int]:
    """Cancel every child of ``run_id`` that has not ended (and their children); how many."""
    cancelled = 0
    for child, outcome in (yield from children_of(run_id)).items():
        if outcome is not None:
            continue
        try:
            yield from cancel_run(child, run_retention_s, now, by)
        except (errors.OperationRefused, errors.RunNotFound):
            continue  # it ended meanwhile, or its record is gone
        cancelled += 1
    return cancelled


def replay_run(run_id: str, from_start: bool, from_seq: int | None = None, by: str = "") -> Op[RunInfo]:
    """Queue a dead or cancelled run again with a fresh attempt budget; the caller sends the message.

    The checkpoint is kept, so the run resumes where it stopped, unless ``from_start`` (the
    checkpoint, its history and the records go) or ``from_seq``: checkpoint ``from_seq`` of
    its history becomes the latest, the checkpoints after it and the records are dropped
    (CheckpointNotFound when the run keeps no such checkpoint; nothing changes then). ``by`` (who
    replays) is recorded on the run's event.
    """
    args = ReplayArgs(from_start, None if from_seq is None else int(from_seq), by).argv()
    reply = yield from per_run("replay", run_id, run_id, clock.now_ms(), args)
    if text(reply[0]) == "no_checkpoint":
        assert from_seq is not None
        raise (yield from missing_checkpoint(run_id, from_seq))
    return snapshot(run_id, reply, "only dead or cancelled runs replay")


def replay_children(run_id: str) -> Op[list[RunInfo]]:
    """Before a parent's replay: replay each of its children that ended dead or cancelled (and
    theirs), so the replayed parent's step waits for them again; those that succeeded are reused.
    Returns the children queued again, whose messages the caller sends."""
    replayed: list[RunInfo] = []
    status, children = (text(v) for v in (yield cmd("hmget", keys.run(run_id), "status", "children")))
    if not children or status not in (Status.DEAD, Status.CANCELLED):
        return replayed  # no children, or a run its replay refuses (which then changes nothing)
    for child, outcome in (yield from children_of(run_id)).items():
        if outcome is None or outcome.status is Status.SUCCEEDED:
            continue
        # Pending again in the parent first: the replayed child's end then tells it (child_ended.lua).
        yield cmd("hset", keys.mailbox(run_id), f"{CHILD_FIELD}{child}", "")
        replayed.extend((yield from replay_children(child)))
        try:
            replayed.append((yield from replay_run(child, False)))
        except (errors.OperationRefused, errors.RunNotFound):
            yield from tell_parent(child)  # it was replayed already, or is gone: tell the parent as it is
    return replayed


def purge_run(run_id: str, by: str = "") -> Op[bool]:
    """Delete a finished run (succeeded, dead or cancelled) and its index entries; False when there
    is no such run. The run's events go with it, so ``by`` (who purges) is recorded in the fleet's
    audit trail (store/audit.py)."""
    reply = yield from per_run("purge", run_id, run_id, clock.now_ms(), [])
    outcome = text(reply[0])
    if outcome == "refused":
        status = text(reply[1])
        raise errors.OperationRefused(
            f"run {run_id} is {status}; only finished runs (succeeded, dead or cancelled) can be "
            "purged: cancel it first",
            status=status,
        )
    if outcome == "ok":
        yield from audit.record(audit.PURGE, run_id, by)
        log.info(
            "run %s purged by %s; its record and events are gone, the audit trail keeps the purge",
            run_id,
            by or "an unnamed caller",
        )
    return outcome == "ok"


# -- the store's table (store/redis_store.py) ---------------------------------------------------


def cancel(store: StoreSettings, run_id: str, *, now: bool = False) -> Op[RunInfo]:
    """Cancel an active or waiting run, its finished keys kept the store's run retention; see
    :func:`cancel_run`."""
    return cancel_run(run_id, store.options.run_retention_s, now)


def replay(run_id: str, *, from_start: bool = False, from_seq: int | None = None) -> Op[RunInfo]:
    """Queue a dead or cancelled run again; the caller sends the message. See :func:`replay_run`."""
    return replay_run(run_id, from_start, from_seq)


def purge(run_id: str) -> Op[bool]:
    """Delete a finished run; False when there is no such run. See :func:`purge_run`."""
    return purge_run(run_id)
