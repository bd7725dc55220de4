"""The quarantine list: queue items no worker could run, moved aside with a reason.

A worker that pops an item it cannot turn into a run (not JSON, not a Celery message, an
unknown task...) must neither crash nor silently drop it: the item goes here, with why,
and the worker carries on. Operators read and clear the list with ``reflexr-graph dlq
messages`` and ``dlq messages --purge``.

Bounds: the list keeps the newest :data:`MAXLEN` entries, and an entry keeps at most the
first ``RAW_LIMIT`` bytes (``model.py``) of its item (flagged ``truncated``), so a flood of garbage
costs Redis at most about MAXLEN x RAW_LIMIT x 4/3 (base64) bytes, some 22 MB. The count
per reason (``rg:quarantine:counts``) goes on counting what fell off the list.
"""

from __future__ import annotations

import redis

from reflexr_graph.model import Quarantined, QuarantinedItem
from reflexr_graph.store import audit, keys
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import Op, batch, cmd, drive
from reflexr_graph.store.records import text_map

MAXLEN = 1000
"""Entries kept; pushing one more drops the oldest."""


def quarantined(limit: int) -> Op[Quarantined]:
    """The newest ``limit`` entries (0: none), the list's length and the counts, in one MULTI."""
    commands = [cmd("llen", keys.QUARANTINE), cmd("hgetall", keys.QUARANTINE_COUNTS)]
    if limit > 0:
        commands.append(cmd("lrange", keys.QUARANTINE, 0, limit - 1))
    length, counts, *found = yield batch(commands, transaction=True)
    return Quarantined(
        items=[QuarantinedItem.from_json(v) for v in (found[0] if found else [])],
        length=int(length),
        counts={reason: int(n) for reason, n in text_map(counts).items()},
    )


def purge_quarantine(by: str = "") -> Op[int]:
    """Delete every entry and the counts, in one MULTI that also records who did it in the audit
    trail (store/audit.py, the same slot); returns how many entries there were."""
    length, *_ = yield batch(
        [
            cmd("llen", keys.QUARANTINE),
            cmd("delete", keys.QUARANTINE, keys.QUARANTINE_COUNTS),
            audit.append(audit.QUARANTINE_PURGE, "", by),
        ],
        transaction=True,
    )
    return int(length)


def put_item(item: QuarantinedItem) -> Op[None]:
    """Add ``item`` as the newest entry, drop what is past MAXLEN, and count it, in one MULTI."""
    yield batch(
        [
            cmd("lpush", keys.QUARANTINE, item.to_json()),
            cmd("ltrim", keys.QUARANTINE, 0, MAXLEN - 1),
            cmd("hincrby", keys.QUARANTINE_COUNTS, item.reason, 1),
        ],
        transaction=True,
    )


class Quarantine:
    """The quarantine list on one Redis client; reading it without Redis raises StoreUnavailable."""

    def __init__(self, client: redis.Redis) -> None:
        self._store = StoreBase(client)

    def put(self, item: QuarantinedItem) -> None:
        """See :func:`put_item`.

        It raises redis-py's errors as they are, not StoreUnavailable (``StoreBase.answer``): its
        callers run inside kombu and Celery, which reconnect on those.
        """
        drive(put_item(item), self._store.answer)

    def items(self, limit: int = MAXLEN) -> list[QuarantinedItem]:
        """Entries, newest first."""
        return self._store.do(quarantined(limit)).items

    def length(self) -> int:
        return self._store.do(quarantined(0)).length

    def counts(self) -> dict[str, int]:
        """Items moved aside since the last purge, by reason, including those past MAXLEN."""
        return self._store.do(quarantined(0)).counts

    def purge(self) -> int:
        """See :func:`purge_quarantine`."""
        return self._store.do(purge_quarantine())
