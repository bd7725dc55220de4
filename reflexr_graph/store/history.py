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
from reflexr_graph.store.contracts import CheckpointListReply, CheckpointReply, Kept, ReadCheckpointArgs
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
    raw = yield Eval("list_checkpoints", [keys.run(run_id)], [])
    reply = CheckpointListReply.parse([text(v) for v in raw])
    if reply.outcome is Kept.MISSING:
        raise not_found(run_id)
    return [checkpoint_entry(seq, entry) for seq, entry in reply.entries]


def missing_checkpoint(run_id: str, seq: int) -> Op[errors.CheckpointNotFound]:
    """The error for a seq the run does not keep, naming the ones it does."""
    kept = yield from checkpoint_list(run_id)
    return errors.CheckpointNotFound(run_id=run_id, seq=seq, kept=[c.seq for c in kept])


def saved_checkpoint(run_id: str, seq: int) -> Op[SavedCheckpoint]:
    """Checkpoint ``seq`` of the run, with the run's graph and recorded inputs, in one round trip.

    RunNotFound for no run, CheckpointNotFound when the run keeps no checkpoint ``seq``.
    """
    script_keys = [keys.run(run_id), keys.ckpt(run_id), keys.inputs(run_id)]
    raw = yield Eval("read_checkpoint", script_keys, ReadCheckpointArgs(int(seq)).argv())
    reply = CheckpointReply.parse([text(v) for v in raw])
    if reply.outcome is Kept.MISSING:
        raise not_found(run_id)
    if reply.outcome is Kept.NONE:
        raise (yield from missing_checkpoint(run_id, seq))
    payload = reply.payload
    if reply.output is not None:  # a finished checkpoint kept as its entry alone: its version and output
        payload = finished_checkpoint(reply.graph, reply.version, reply.seq, reply.output)
    return SavedCheckpoint(
        info=checkpoint_info(reply.seq, reply.saved_at, reply.size, reply.attempt, reply.next_node),
        payload=payload,
        graph=reply.graph,
        inputs_json=reply.inputs,
        state_json=reply.state or None,
    )
