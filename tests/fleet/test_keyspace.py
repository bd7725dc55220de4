"""User text cannot forge our keys (store/keys.py: USER_TEXT): tags and idempotency keys ending in
``:run``, and a foreign producer's task ids shaped like index keys, against a real worker; rekey
and the payload sweep then run clean, and later enqueues with those tags and keys work."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph.client import Client
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.payload_store import FilePayloadStore
from reflexr_graph.store.payload_sweep import sweep
from reflexr_graph.store.quarantine import Quarantine
from reflexr_graph.store.rekey import rekey
from reflexr_graph.store.settings import StoreOptions
from tests.fleet.conftest import Fleet
from tests.fleet.test_messages import json_body, publish_raw
from tests.store.test_payloads import spec
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

GRAPH = "steps"


def _picked(make: Callable[[int], str], collides: Callable[[int], bool], n: int) -> list[str]:
    """The first ``n`` texts ``make(i)`` for which the old layout (user text in the key name, a
    run's id free of checks) made a key a run's key too: each would have collided before."""
    return [make(i) for i in range(100_000) if collides(i)][:n]


# A tag index was rg:{s0}:tag:t=<value> on a standalone store: with a value 'c<i>:run' it was
# the ':run' key of run 'tag:t=c<i>' whenever that run's shard was 0 too.
TAG_VALUES = _picked(lambda i: f"c{i}:run", lambda i: keys.shard_of(f"tag:t=c{i}") == 0, 100)
# An idempotency key was rg:{s<shard of scope>}:idem:<graph>:<key>: the ':run' key of run
# 'idem:<graph>:d<i>' when both were in one shard.
IDEM_KEYS = _picked(
    lambda i: f"d{i}:run",
    lambda i: keys.shard_of(f"idem:{GRAPH}:d{i}") == keys.shard_of(f"{GRAPH}:d{i}:run"),
    100,
)
FOREIGN_TAGS = _picked(lambda i: f"f{i}", lambda i: keys.shard_of(f"tag:t=f{i}") == 0, 3)
FOREIGN_KEYS = _picked(
    lambda i: f"g{i}",
    lambda i: keys.shard_of(f"idem:{GRAPH}:g{i}") == keys.shard_of(f"{GRAPH}:g{i}:run"),
    3,
)


@pytest.fixture
def keyed_store(redis_url: str, tmp_path: Path) -> Iterator[RedisStore]:
    blobs = FilePayloadStore(tmp_path / "payloads")
    store = RedisStore.from_url(
        redis_url, options=StoreOptions(codec=PayloadCodec(KeyRing.parse(spec("k1")), blobs))
    )
    try:
        yield store
    finally:
        store.close()


def test_user_text_and_foreign_ids_shaped_like_our_keys_break_nothing(
    fleet: Fleet,
    client_for: Callable[[Fleet], Client],
    redis_client: redis.Redis,
    keyed_store: RedisStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = fleet.start()
    foreign = [f"tag:t={v}" for v in FOREIGN_TAGS] + [f"idem:{GRAPH}:{k}" for k in FOREIGN_KEYS]
    foreign += [keys.tag_index("t", "x", 0).split("}:", 1)[1], "#idem:0"]
    for task_id in foreign:
        publish_raw(
            fleet.redis_url, fleet.queue, json_body([], {"graph": GRAPH, "inputs": {}}), task_id=task_id
        )
    hostile = "\x1b[2J\x1b]0;owned\x07" + "g" * 200_000 + "\x1f"
    publish_raw(fleet.redis_url, fleet.queue, json_body([], {"graph": hostile, "inputs": {}}))
    quarantine = Quarantine(redis_client)

    def all_quarantined() -> bool:
        return len(quarantine.items()) >= len(foreign) + 1

    wait_for(
        all_quarantined, 60, "every foreign task id shaped like a key, and the hostile name, quarantined"
    )
    reasons = sorted(i.reason for i in quarantine.items())
    assert reasons == ["bad_name"] + ["invalid_task"] * len(foreign)
    assert all("the run id" in i.detail for i in quarantine.items() if i.reason == "invalid_task")
    # Its log line is bounded and holds none of the name: no escape reaches a terminal tailing it.
    lines = [line for line in worker.log().splitlines() if "bad_name" in line]
    assert len(lines) == 1 and len(lines[0]) < 1000 and "\x1b" not in worker.log() and "ggg" not in lines[0]
    worker.kill_group()  # the runs below stay queued: only their keys matter here

    client = client_for(fleet)
    made = [client.enqueue(GRAPH, {}, tags={"t": v}) for v in TAG_VALUES]
    made += [client.enqueue(GRAPH, {}, idempotency_key=k) for k in IDEM_KEYS]
    keyed_store.codec.blobs.put(b"an orphan")  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING):
        report = rekey(keyed_store)
        assert sweep(keyed_store, grace_s=0) == 1
    assert report.unreadable == {}
    assert report.runs == len(made)
    assert "WRONGTYPE" not in caplog.text

    # Later enqueues with the tags and keys the foreign ids were shaped after.
    later = [client.enqueue(GRAPH, {}, tags={"t": f"{v}:run"}) for v in FOREIGN_TAGS]
    later += [client.enqueue(GRAPH, {}, idempotency_key=f"{k}:run") for k in FOREIGN_KEYS]
    assert client.enqueue(GRAPH, {}, idempotency_key=f"{FOREIGN_KEYS[0]}:run") == later[len(FOREIGN_TAGS)]
    for value, run_id in zip(FOREIGN_TAGS, later, strict=False):
        assert [r.run_id for r in client.runs(tags={"t": f"{value}:run"})] == [run_id]
    assert [r.run_id for r in client.runs(tags={"t": TAG_VALUES[7]})] == [made[7]]
    members = [m.decode() for m in redis_client.zrange(keys.all_runs(0), 0, -1)]
    assert sorted(members) == sorted(made + later)
    assert all(redis_client.type(keys.run(m)) == b"hash" for m in members)
    assert json.loads(redis_client.hget(keys.run(made[0]), "tags") or b"{}") == {"t": TAG_VALUES[0]}
