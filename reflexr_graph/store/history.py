"""Reading a run's checkpoint history: the checkpoints it keeps, and any one of them whole.

The latest checkpoint lives in the run's ``ckpt`` hash, which the claim reads; the ones before
it, at most ``REFLEXR_CHECKPOINT_HISTORY`` of them, in the ``history`` index and its data hash.
The scripts that save checkpoints keep them (``lua/_history.lua``); this only reads.
"""

from __future__ import annotations

from reflexr_graph.model import CheckpointInfo
from reflexr_graph.store import keys
from reflexr_graph.store.base import StoreBase, _not_found, translate_errors
from reflexr_graph.store.records import SavedCheckpoint, checkpoint_info, text


class History(StoreBase):
    """The checkpoints a run keeps, listed and read."""

    @translate_errors
    def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint the run keeps, oldest first, the latest last; RunNotFound for no run.

        Read in one MULTI, so a running attempt's save never shows a checkpoint twice or not at all.
        """
        pipe = self._r.pipeline(transaction=True)
        pipe.exists(keys.run(run_id))
        pipe.zrange(keys.history(run_id), 0, -1)
        pipe.hmget(keys.ckpt(run_id), ["seq", "saved_at", "size", "attempt", "next_node"])
        exists, members, latest = pipe.execute()
        if not exists:
            raise _not_found(run_id)
        found = [checkpoint_info(*text(m).split("|", 4)) for m in members]
        if latest[0] is not None:
            found.append(checkpoint_info(*(text(v) for v in latest)))
        return found

    @translate_errors
    def read_checkpoint(self, run_id: str, seq: int) -> SavedCheckpoint:
        """Checkpoint ``seq`` of the run, with the run's graph and recorded inputs, in one round trip.

        RunNotFound for no run, CheckpointNotFound when the run keeps no checkpoint ``seq``.
        """
        script_keys = [keys.run(run_id), keys.ckpt(run_id), keys.history(run_id), keys.history_data(run_id)]
        reply = [text(v) for v in self._scripts("read_checkpoint", script_keys, [int(seq)])]
        if reply[0] == "missing":
            raise _not_found(run_id)
        if reply[0] == "none":
            raise self._no_checkpoint(run_id, seq)
        found, saved_at, size, attempt, next_node, payload, graph, inputs, state = reply[1:10]
        return SavedCheckpoint(
            info=checkpoint_info(found, saved_at, size, attempt, next_node),
            payload=payload,
            graph=graph,
            inputs_json=inputs,
            state_json=state or None,
        )
