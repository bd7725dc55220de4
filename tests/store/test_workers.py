"""The registry of live workers: a worker counts while its heartbeat is ahead of now, whatever its
description and served entries, which its full beats write and which outlive the heartbeat."""

from __future__ import annotations

import pytest
import redis

from reflexr_graph import schemas
from reflexr_graph.fleet import presence
from reflexr_graph.model import VersionEntry, WorkerInfo
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.versions import served_versions
from tests.store.support import FakeClock

INFO = WorkerInfo(name="w@host", graphs=("g",), graph_versions={"g": "v1"})
TTL_MS = 1_000
DESCRIBED_MS = 60_000


def _counted(store: RedisStore) -> tuple[list[str], list[str], list[str]]:
    """The worker as every reader of the registry sees it: serving, the version's workers, live workers."""
    version = store.do(served_versions("g"))
    return (
        store.serving(["g"])["g"],
        [w for v in version for w in v.workers],
        [w.name for w in store.live_workers()],
    )


def test_a_worker_counts_while_its_heartbeat_does_not_while_its_served_entries_last(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    store.publish_versions([VersionEntry(version="v1", fingerprint="f", first_published_at=1.0)], ["g"])
    store.worker_beat(INFO, ttl_ms=TTL_MS, described_ms=DESCRIBED_MS)
    live = (["w@host"], ["w@host"], ["w@host"])
    assert _counted(store) == live
    # Beats between full ones refresh only the heartbeat: one ZADD, and the worker still counts.
    for _ in range(3):
        fake_clock.advance(TTL_MS - 100)
        store.worker_alive(INFO.name, ttl_ms=TTL_MS)
        assert _counted(store) == live
    # It stopped beating: its entries last a minute more, but no reader counts it.
    fake_clock.advance(TTL_MS + 1)
    assert raw.zscore(keys.served("g"), INFO.name) is not None and raw.exists(keys.worker(INFO.name))
    assert _counted(store) == ([], [], [])


def test_published_with_workers_counts_only_a_live_worker(
    store: RedisStore, raw: redis.Redis, fake_clock: FakeClock
) -> None:
    raw.hset(
        keys.GRAPHS,
        "g",
        schemas.GraphSchema(
            name="g", fingerprint="f", inputs={}, state={}, output={}, mermaid=""
        ).model_dump_json(),
    )
    store.worker_beat(INFO, ttl_ms=TTL_MS, described_ms=DESCRIBED_MS)
    assert store.do(schemas.published_with_workers("g"))[1] == ["w@host"]
    fake_clock.advance(TTL_MS + 1)
    assert store.do(schemas.published_with_workers("g"))[1] == []


def test_a_full_beat_gives_a_served_set_it_creates_an_expiry_and_leave_removes_everything(
    store: RedisStore, raw: redis.Redis
) -> None:
    store.worker_beat(INFO, ttl_ms=TTL_MS, described_ms=DESCRIBED_MS, sets_ms=600_000, trim=False)
    for key in (keys.served("g"), keys.served_version("g", "v1")):
        assert 0 < raw.pttl(key) <= 600_000, key
    assert 0 < raw.pttl(keys.worker(INFO.name)) <= DESCRIBED_MS
    store.worker_leave(INFO)
    found = [raw.exists(keys.served("g")), raw.exists(keys.worker(INFO.name)), raw.zcard(keys.WORKERS)]
    assert found == [0, 0, 0]


def test_beats_between_full_ones_write_only_the_heartbeat_unless_the_registry_lost_the_worker(
    store: RedisStore, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(presence, "BEAT_EVERY_S", 0.0)  # every call beats
    beat = presence.Presence(store, INFO)
    beat.maybe_beat()  # the first is a full one
    raw.delete(keys.worker(INFO.name))
    beat.maybe_beat()
    assert not raw.exists(keys.worker(INFO.name)), "a beat between full ones writes only the heartbeat"
    raw.flushall()  # Redis lost its data: the heartbeat's ZADD finds the worker gone, and a full beat follows
    beat.maybe_beat()
    assert store.serving(["g"]) == {"g": ["w@host"]}
    assert [w.name for w in store.live_workers()] == ["w@host"]
