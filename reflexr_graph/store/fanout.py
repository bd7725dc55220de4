"""Reading every shard's copy of an index at once, merged newest first (store/keys.py: Shards).

A run's indexes (every run, a status, the dead letters, the leases, the due set) are kept per
shard, so that each script touches one slot. A listing reads the same index of every shard in
one pipeline (on a Redis Cluster, one request per primary) and merges them in the order one
index would have: score descending, then member descending, which is ZREVRANGEBYSCORE's. The
position it goes on from is a (score, member) pair, so a listing's cursor is the one it had
when there was one index.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from reflexr_graph.store import cluster, keys
from reflexr_graph.store.ops import Op, batch, cmd, layout
from reflexr_graph.store.records import text

Row = tuple[str, float]
"""An index entry: (member, score)."""
Position = tuple[float, str]
"""Where a listing stands: the (score, member) of the last entry it examined."""


def _order(row: Row) -> tuple[float, str]:
    return row[1], row[0]


def after(rows: list[Row], position: Position | None) -> list[Row]:
    """Rows past ``position``: equal scores are ordered by member, descending, as ZREVRANGE does."""
    if position is None:
        return rows
    score, member = position
    return [(m, s) for m, s in rows if s < score or (s == score and m < member)]


def per_shard(want: int, shards: keys.Shards) -> int:
    """How many entries to read from each shard for ``want`` merged ones in one round, mostly:
    the spread of the newest ``want`` over the shards, with a margin for the busiest shard. One
    shard reads one more than ``want``: a read from a position starts at its score, so it meets
    the position's own entry again."""
    if shards.count == 1:
        return want + 1
    mean = math.ceil(want / shards.count)
    return mean + 2 * math.ceil(math.sqrt(mean)) + 4


def _merge(pages: Sequence[list[Any]], position: Position | None, num: int) -> tuple[list[Row], bool]:
    """The shards' pages merged: only rows no unread entry of a shard can precede (a full page's
    shard may hold more below its last row), and whether any shard may hold more."""
    rows: list[Row] = []
    floor: Row | None = None
    for page in pages:
        got = [(text(m), float(s)) for m, s in page]
        rows.extend(after(got, position))
        if len(got) == num and (floor is None or _order(got[-1]) > _order(floor)):
            floor = got[-1]
    rows.sort(key=_order, reverse=True)
    if floor is None:
        return rows, False
    bound = _order(floor)
    return [r for r in rows if _order(r) >= bound], True


def newest(
    index_of: Callable[[int], str], position: Position | None, want: int
) -> Op[tuple[list[Row], bool]]:
    """The next entries of every shard's index ``index_of(shard)`` past ``position``, merged newest
    first (at least one unless none is left), and whether more may follow them."""
    shards = yield from layout()
    num = per_shard(want, shards)
    top: float | str = "+inf" if position is None else position[0]
    while True:
        pages = yield batch(
            [
                cmd("zrevrangebyscore", index_of(n), top, "-inf", start=0, num=num, withscores=True)
                for n in shards.all
            ]
        )
        rows, more = _merge(pages, position, num)
        if rows or not more:
            return rows, more
        # A shard's whole page tied with the position (one score, members at or above it): read deeper.
        num *= 2


def count(index_of: Callable[[int], str]) -> Op[int]:
    """How many entries every shard's index ``index_of(shard)`` holds together (one pipeline)."""
    shards = yield from layout()
    sizes = yield batch([cmd("zcard", index_of(n)) for n in shards.all])
    return sum(int(n) for n in sizes)


def total(client: Any, index_of: Callable[[int], str]) -> int:
    """:func:`count` on a blocking redis-py client (tests, benchmarks, the demo)."""
    pipe = client.pipeline(transaction=False)
    for n in cluster.shards(client).all:
        pipe.zcard(index_of(n))
    return sum(int(n) for n in pipe.execute())
