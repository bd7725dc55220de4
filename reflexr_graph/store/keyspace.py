"""Walking the whole keyspace, for the few that must: the payload sweep, ``rekey`` and the keyspace
migration, which look for keys no index lists.

A walk is SCAN page by page, each page one request through the store's executor (``ops.Scan``:
the executor translates its errors and walks a cluster's primaries), so a walk holds no client.
Between pages the caller reads and writes what it found, each through the executor too.
"""

from __future__ import annotations

from collections.abc import Iterator

from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import SCAN_START, Scan, ScanCursor, one
from reflexr_graph.store.records import text


def every_key(store: StoreBase, match: str, count: int) -> Iterator[str]:
    """Each key of the store whose name matches ``match`` (a SCAN pattern), ``count`` or so a page;
    a key may come twice, and one written during the walk may come or not (SCAN's guarantees)."""
    cursor: ScanCursor = SCAN_START
    while True:
        cursor, found = store.do(one(Scan(match, count, cursor)))
        yield from map(text, found)
        if not cursor:
            return
