"""Reading a run's checkpoint history: the checkpoints it keeps, and any one of them whole.

The latest checkpoint lives in the run's ``ckpt`` hash, which the claim reads; the ones before
it, at most ``REFLEXR_CHECKPOINT_HISTORY`` of them, in the ``history`` index and its data hash.
The scripts that save checkpoints keep them (``lua/_history.lua``); these operations only read,
each in one read-only script, so a save running meanwhile never shows a checkpoint twice.
"""

from __future__ import annotations

from reflexr_graph import errors
from reflexr_graph.model import CheckpointInfo
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import Eval, Op, not_found
from reflexr_graph.store.records import SavedCheckpoint, checkpoint_info, text


def checkpoint_list(run_id: str) -> Op[list[CheckpointInfo]]:
    """Every checkpoint the run keeps, oldest first, the latest last; RunNotFound for no run."""
    script_keys = [keys.run(run_id), keys.ckpt(run_id), keys.history(run_id)]
    reply = [text(v) for v in (yield Eval("list_checkpoints", script_keys, []))]
    if reply[0] == "missing":
        raise not_found(run_id)
    latest, members = reply[1:6], reply[6:]
    found = [checkpoint_info(*member.split("|", 4)) for member in members]
    if latest[0]:
        found.append(checkpoint_info(*latest))
    return found


def missing_checkpoint(run_id: str, seq: int) -> Op[errors.CheckpointNotFound]:
    """The error for a seq the run does not keep, naming the ones it does."""
    kept = yield from checkpoint_list(run_id)
    return errors.CheckpointNotFound(run_id=run_id, seq=seq, kept=[c.seq for c in kept])


def saved_checkpoint(run_id: str, seq: int) -> Op[SavedCheckpoint]:
    """Checkpoint ``seq`` of the run, with the run's graph and recorded inputs, in one round trip.

    RunNotFound for no run, CheckpointNotFound when the run keeps no checkpoint ``seq``.
    """
    script_keys = [keys.run(run_id), keys.ckpt(run_id), keys.history(run_id), keys.history_data(run_id)]
    reply = [text(v) for v in (yield Eval("read_checkpoint", script_keys, [int(seq)]))]
    if reply[0] == "missing":
        raise not_found(run_id)
    if reply[0] == "none":
        raise (yield from missing_checkpoint(run_id, seq))
    found, saved_at, size, attempt, next_node, payload, graph, inputs, state = reply[1:10]
    return SavedCheckpoint(
        info=checkpoint_info(found, saved_at, size, attempt, next_node),
        payload=payload,
        graph=graph,
        inputs_json=inputs,
        state_json=state or None,
    )


class History(StoreBase):
    """The checkpoints a run keeps, listed and read."""

    def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """See :func:`checkpoint_list`."""
        return self.do(checkpoint_list(run_id))

    def read_checkpoint(self, run_id: str, seq: int) -> SavedCheckpoint:
        """See :func:`saved_checkpoint`."""
        return self.do(saved_checkpoint(run_id, seq))
