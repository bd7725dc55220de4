"""The store at scale, quick: with 10,000 finished runs held, every per-tick and per-request
cost is what it is with a few hundred, counted in Redis commands (never timed), and retention
empties the global indexes in a bounded number of prune passes.

The store is filled through its own scripts, and the operations are counted, by
``reflexr_graph/local_store.py``: what ``make bench`` uses for a million runs (bench/store_scale.py).
"""

from __future__ import annotations

from functools import partial

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet.factory import create_app
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.local_store import Mix, counted, fill, operations
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, fanout, keys
from reflexr_graph.store.attempts import NewRun, create_args
from reflexr_graph.store.ops import ScriptArg
from reflexr_graph.store.reads import SCAN_BUDGET, runs_listing
from reflexr_graph.store.recovery import PRUNE_BATCH
from reflexr_graph.store.settings import StoreOptions
from tests.store.support import FakeClock, make_run

pytestmark = pytest.mark.timeout(300)

SMALL = Mix(400, 40, 10)
LARGE = Mix(10_000, 1_100, 100)
"""25 times the small store, and more dead runs than `dlq list` shows (1,000), so its limit binds."""


def _commands(redis_url: str, r: redis.Redis, mix: Mix) -> dict[str, int]:
    r.flushall()
    with Client(load_settings(redis_url=redis_url)) as client:
        fill(client.store, mix, progress=lambda _: None)
        reaper = Reaper(create_app(load_settings(redis_url=redis_url), {}), client.store)
        try:
            reaper.tick()  # takes the lock
            # The last of three: the first tick after taking the lock extends it for the first time.
            ops = operations(client, reaper).items()
            return {name: [counted(r, op).commands for _ in range(3)][-1] for name, op in ops}
        finally:
            reaper.stop()


def test_per_tick_and_per_request_costs_do_not_grow_with_the_store(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    try:
        small = _commands(redis_url, r, SMALL)
        large = _commands(redis_url, r, LARGE)
    finally:
        r.close()
    # What the store holds does not change them...
    for name in ("reaper tick", "`runs` (newest 50)", "`runs --status succeeded`", "`status RUN`"):
        assert large[name] == small[name], name
    # A standalone store's indexes are one shard (keys.Shards): as unsharded, so main's caps hold.
    assert large["`runs` (newest 50)"] <= 55  # one ZREVRANGEBYSCORE and 50 HGETALLs, not 200
    assert large["reaper tick"] <= 20
    # ...and where a limit bounds them, the limit does, not the 11,200 runs held.
    assert large["`dlq list` (newest 1,000)"] <= 1000 + 10
    assert large["API page, graph matching none"] <= SCAN_BUDGET + SCAN_BUDGET // 200 + 2


def test_retention_empties_the_indexes_in_bounded_prune_passes(redis_url: str) -> None:
    """Every finished run expired: each pass prunes at most PRUNE_BATCH per status, and the
    passes leave no entry of them in any global index and none of their keys."""
    store = RedisStore.from_url(redis_url, options=StoreOptions(run_retention_s=1))
    r = store.client
    try:
        r.flushall()
        mix = Mix(5_000, 50, 5)
        fill(store, mix, progress=lambda _: None)
        pipe = r.pipeline(transaction=False)
        for n in range(mix.finished):
            for key in keys.run_keys(f"s-finished-{n}"):
                pipe.pexpire(key, 1)
        pipe.execute()
        # Retention is 1 s past each run's finish, on the store's clock.
        passes = []
        now = clock.now_ms() + 2000
        while fanout.total(r, partial(keys.status_set, Status.SUCCEEDED)):
            passes.append(store.prune(now))
            assert len(passes) <= mix.finished // PRUNE_BATCH + 1
        assert max(passes) <= PRUNE_BATCH
        assert sum(passes) == mix.finished
        assert fanout.total(r, keys.all_runs) == mix.dead + mix.waiting
        assert list(r.scan_iter("rg:{s*}:s-finished-*", count=1000)) == []  # prune deleted what was left
        assert r.exists(keys.run("s-dead-0"), keys.run("s-waiting-0")) == 2
    finally:
        store.close()


def test_a_bounded_page_goes_on_from_its_cursor(store: RedisStore, fake_clock: FakeClock) -> None:
    """A filter few runs match: the page request stops after SCAN_BUDGET entries with a cursor, and
    the cursor goes on from there, so paging finds the run the first page did not reach."""
    make_run(store, "rare")  # the oldest run, of graph 'demo'
    pipe = store.client.pipeline(transaction=False)
    for n in range(SCAN_BUDGET + 10):
        fake_clock.advance(1)
        run_id = f"other-{n}"
        run = NewRun(run_id, "other", "{}", None, None, max_attempts=3, dispatch_grace_ms=0)
        args: list[ScriptArg] = [run_id, fake_clock.ms, run_id, *create_args(run, fake_clock.ms)]
        store._scripts.queue(
            pipe, "create_run", keys.script_keys(run_id, run_id, store.shards, [keys.run(run_id)]), args
        )
    pipe.execute()
    first = store.do(runs_listing(None, "demo", 50))
    assert first.runs == [] and first.cursor is not None
    second = store.do(runs_listing(None, "demo", 50, first.cursor))
    assert [info.run_id for info in second.runs] == ["rare"]
    assert second.cursor is None
    # The blocking list reads on by itself.
    assert [info.run_id for info in store.list_runs(graph="demo")] == ["rare"]
