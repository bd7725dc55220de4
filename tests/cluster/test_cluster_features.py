"""Main's features whose keys span runs, on a real 3-primary Redis Cluster: each is placed in the
run's shard or the control slot (one slot per script)."""

from __future__ import annotations

import redis

from reflexr_graph import clock
from reflexr_graph.core.port import Emission
from reflexr_graph.core.schedules import Schedule
from reflexr_graph.store import hot_path, keys
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.contracts import VersionHold
from reflexr_graph.store.reads import runs_listing
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.schedules import fire_run, list_schedules, put_schedule
from reflexr_graph.store.streams import stream_page
from reflexr_graph.store.upgrades import latest_checkpoints, mark_of, upgrade_run
from reflexr_graph.store.versions import held_runs
from tests.store.support import fail_once, make_run, start


def _tagged_run(store: RedisStore, run_id: str, team: str) -> str:
    run = NewRun(
        run_id, "demo", "{}", None, None, max_attempts=3, dispatch_grace_ms=60_000, tags={"team": team}
    )
    created_id, created = store.do(new_run(run))
    assert created
    return created_id


def test_the_store_on_a_cluster_has_64_shards(store: RedisStore) -> None:
    assert store.shards is keys.CLUSTER and store.shards.count == keys.SHARDS


def test_tag_indexes_are_per_shard_and_a_listing_by_tag_merges_them(
    store: RedisStore, cluster_client: redis.RedisCluster
) -> None:
    mine = [_tagged_run(store, f"tag-a-{n}", "a") for n in range(12)]
    others = [_tagged_run(store, f"tag-b-{n}", "b") for n in range(4)]
    assert len({keys.shard_of(r) for r in mine}) > 3
    for run_id in mine:
        assert cluster_client.zscore(keys.tag_index("team", "a", keys.shard_of(run_id)), run_id) is not None
    found = store.do(runs_listing(None, None, 100, tags={"team": "a"}))
    assert sorted(i.run_id for i in found.runs) == sorted(mine)
    assert not set(others) & {i.run_id for i in found.runs}


def test_the_retries_rollup_is_kept_in_the_runs_shard(
    store: RedisStore, cluster_client: redis.RedisCluster
) -> None:
    run_id = make_run(store, "retried-1")
    fail_once(store, start(store, run_id))
    assert cluster_client.zcard(keys.retries(keys.shard_of(run_id))) == 1


def test_runs_held_for_a_version_are_kept_per_shard_and_listed_and_woken(
    store: RedisStore, cluster_client: redis.RedisCluster
) -> None:
    run_ids = [make_run(store, f"held-{n}") for n in range(6)]
    assert len({keys.shard_of(r) for r in run_ids}) > 1
    for run_id in run_ids:
        cluster_client.hset(keys.run(run_id), "version", "v1")  # as its first claim, on a v1 worker, wrote it
        outcomes = [store.hold_version(run_id, "demo", "v1", grace_ms=0, recheck_ms=1000) for _ in range(2)]
        assert VersionHold.WAITING in outcomes, outcomes
    assert store.do(held_runs("demo", "v1")) == sorted(run_ids)
    assert sorted(store.held_for_version("demo", "v1", 100)) == sorted(run_ids)
    assert store.wake_version(run_ids[0], "demo", "v1", due_ms=0)
    assert store.do(held_runs("demo", "v1")) == sorted(run_ids[1:])


def test_an_upgrade_marks_and_moves_runs_in_their_shards(
    store: RedisStore, cluster_client: redis.RedisCluster
) -> None:
    """upgrade.lua's held set is in each run's shard, its mark in the run hash, and the checkpoints
    an upgrade judges are read across slots."""
    run_ids = [make_run(store, f"moving-{n}") for n in range(4)]
    assert len({keys.shard_of(r) for r in run_ids}) > 1
    for run_id in run_ids:
        cluster_client.hset(keys.run(run_id), "version", "v1")
    assert [(seq, body) for seq, body, _ in store.do(latest_checkpoints(run_ids))] == [("", None)] * 4
    mark = mark_of("v1", resume_compatible=False)
    marked = [store.do(upgrade_run(r, "demo", ("v1", "v2"), mark=mark)) for r in run_ids]
    assert marked == ["marked"] * 4
    assert [store.do(upgrade_run(r, "demo", ("v1", "v2"))) for r in run_ids] == ["upgraded"] * 4
    assert {store.get(r).version for r in run_ids} == {"v2"}
    assert not any(cluster_client.hexists(keys.run(r), "upgrade_mark") for r in run_ids)


def test_a_schedule_lives_in_the_control_slot_and_fires_its_run_in_its_keys_shard(store: RedisStore) -> None:
    schedule = Schedule(name="nightly", graph="demo", every_s=60, inputs={"n": 1})
    store.do(put_schedule(schedule, change=False))
    fire_ms = clock.now_ms()
    run_id, created = store.do(fire_run(schedule, fire_ms, 3, 60_000))
    again, created_again = store.do(fire_run(schedule, fire_ms, 3, 60_000))
    assert (created, created_again, again) == (True, False, run_id), "one run per fire"
    assert [s.schedule.name for s in store.do(list_schedules())] == ["nightly"]


def test_a_runs_stream_is_in_its_slot(store: RedisStore) -> None:
    run_id = make_run(store, "streamed-1")
    ctx = start(store, run_id)
    assert store.append_stream(ctx, [Emission(topic="t", node="n", branch="", value='"hi"')], 0) == 1
    page = store.do(stream_page(run_id, 0, None, None))
    assert [item.value for item in page.items] == ["hi"]


def test_attempts_on_a_cluster_take_no_hot_path(store: RedisStore) -> None:
    assert hot_path.for_attempt(store) is None
