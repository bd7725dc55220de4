"""The fleet's audit trail: who purged, cancelled or cleared what, when (``reflexr-graph audit``,
``GET /api/audit``).

A run's own events say who cancelled or replayed it, but they go with the run: a purge deletes
them, and retention expires them. Each destructive action is therefore also appended to one
stream of the control slot (keys.AUDIT), capped at about :data:`MAX_ENTRIES` (XADD MAXLEN ~,
so trimming is cheap and the stream never grows past a little over the cap). An entry holds the
action, the run it touched ('' for one on no run), who acted and when; never a payload.
"""

from __future__ import annotations

from reflexr_graph import clock
from reflexr_graph.model import AuditEntry
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Command, Op, cmd
from reflexr_graph.store.records import text_map

MAX_ENTRIES = 10_000
"""About how many actions the trail keeps, the newest."""
PURGE = "purge"
CANCEL = "cancel"
QUARANTINE_PURGE = "quarantine purge"


def append(action: str, run_id: str, by: str) -> Command:
    """The XADD that records ``action`` (for a batch of its own, or :func:`record`)."""
    entry = {"action": action, "run": run_id, "by": by, "at": clock.now_ms()}
    return cmd("xadd", keys.AUDIT, entry, maxlen=MAX_ENTRIES, approximate=True)


def record(action: str, run_id: str, by: str) -> Op[None]:
    """Append ``action`` to the trail."""
    yield append(action, run_id, by)


def entries(limit: int = 100) -> Op[list[AuditEntry]]:
    """The newest ``limit`` actions, newest first."""
    found = yield cmd("xrevrange", keys.AUDIT, max="+", min="-", count=limit)
    out = []
    for _id, fields in found or []:
        entry = text_map(fields)
        out.append(
            AuditEntry(
                action=entry.get("action", ""),
                run_id=entry.get("run", ""),
                by=entry.get("by", ""),
                at_ms=int(entry.get("at") or 0),
            )
        )
    return out
