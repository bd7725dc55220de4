"""Reading a run's checkpoint history: the checkpoints it keeps, and any one of them whole.

Every checkpoint a run keeps, the latest included, is in its ``ckpt`` hash (seq -> JSON), each
written once; the run hash holds an entry per checkpoint and the seq of the latest, which the
claim reads it by. A succeeded run's finished checkpoint is its entry alone, rebuilt from the run
hash when read (``records.finished_checkpoint``). The scripts that save checkpoints keep both
(``lua/_history.lua``); these operations only read, each in one read-only script, so a save
running meanwhile never shows a checkpoint it has trimmed.
"""

from __future__ import annotations

from reflexr_graph import errors
from reflexr_graph.model import CheckpointInfo
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import Eval, Op, not_found
from reflexr_graph.store.records import (
    SavedCheckpoint,
    checkpoint_entry,
    checkpoint_info,
    finished_checkpoint,
    text,
)


def checkpoint_list(run_id: str) -> Op[list[CheckpointInfo]]:
    """Every checkpoint the run keeps, oldest first, the latest last; RunNotFound for no run."""
    reply: list[str] = [text(v) for v in (yield Eval("list_checkpoints", [keys.run(run_id)], []))]
    if reply[0] == "missing":
        raise not_found(run_id)
    return [checkpoint_entry(reply[i], reply[i + 1]) for i in range(1, len(reply), 2)]


def missing_checkpoint(run_id: str, seq: int) -> Op[errors.CheckpointNotFound]:
    """The error for a seq the run does not keep, naming the ones it does."""
    kept = yield from checkpoint_list(run_id)
    return errors.CheckpointNotFound(run_id=run_id, seq=seq, kept=[c.seq for c in kept])


def saved_checkpoint(run_id: str, seq: int) -> Op[SavedCheckpoint]:
    """Checkpoint ``seq`` of the run, with the run's graph and recorded inputs, in one round trip.

    RunNotFound for no run, CheckpointNotFound when the run keeps no checkpoint ``seq``.
    """
    script_keys = [keys.run(run_id), keys.ckpt(run_id), keys.inputs(run_id)]
    reply = [text(v) for v in (yield Eval("read_checkpoint", script_keys, [int(seq)]))]
    if reply[0] == "missing":
        raise not_found(run_id)
    if reply[0] == "none":
        raise (yield from missing_checkpoint(run_id, seq))
    found, saved_at, size, attempt, next_node, payload, graph, inputs, state = reply[1:10]
    if len(reply) > 10:  # a finished checkpoint kept as its entry alone: its version and output
        payload = finished_checkpoint(graph, reply[10], found, reply[11])
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
