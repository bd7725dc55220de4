"""A run named by the start of its id, as a person copies it from a listing (the CLI's RUN).

The run index of each shard (``keys.all_runs``) is read with ZSCAN ... MATCH ``<prefix>*``: the
whole index is walked (COUNT :data:`SCAN_COUNT` a round trip), which is a person's one lookup,
never a worker's. A run id holds no glob character (``keys.RUN_ID_PATTERN``), so the prefix needs
no escaping.
"""

from __future__ import annotations

from reflexr_graph import errors
from reflexr_graph.store import keys
from reflexr_graph.store.ops import Op, cmd, layout
from reflexr_graph.store.records import text

MIN_PREFIX = 8
"""The shortest prefix taken: 8 hex characters of a uuid4 are 32 bits, one run in four billion."""
SCAN_COUNT = 1000
SHOWN = 3
"""How many of the runs an ambiguous prefix matches its refusal names."""


def resolve_run_id(given: str) -> Op[str]:
    """The id of the run ``given`` names: ``given`` itself when a run has that id, or when none
    starts with it (the caller's own lookup then says there is no such run, or waits for a foreign
    producer's); else the one run whose id starts with it. RunNotFound for a prefix shorter than
    :data:`MIN_PREFIX` that is no run's id, AmbiguousRunId when more than one run's id starts
    with it."""
    if not keys.RUN_ID_PATTERN.fullmatch(given) or (yield cmd("exists", keys.run(given))):
        return given
    if len(given) < MIN_PREFIX:
        raise errors.RunNotFound(
            f"no run {given}: no run has this id, and a run id prefix needs at least {MIN_PREFIX} characters"
        )
    found = yield from _matching(given)
    if len(found) > 1:
        named = ", ".join(found[:SHOWN]) + (", ..." if len(found) > SHOWN else "")
        raise errors.AmbiguousRunId(
            f"run id prefix {given} matches {len(found)} runs ({named}): give more of the id"
        )
    return found[0] if found else given


def _matching(prefix: str) -> Op[list[str]]:
    """The ids in the run indexes that start with ``prefix``, sorted."""
    shards = yield from layout()
    found: set[str] = set()
    for shard in shards.all:
        cursor = 0
        while True:
            cursor, page = yield cmd(
                "zscan", keys.all_runs(shard), cursor, match=f"{prefix}*", count=SCAN_COUNT
            )
            found.update(text(member) for member, _score in page)
            if not int(cursor):
                break
    return sorted(found)
