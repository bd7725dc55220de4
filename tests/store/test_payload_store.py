"""The payload store (store/payload_store.py): large payloads offloaded, referenced by digest,
read back; a missing or corrupt one is a clear permanent error; the sweep deletes orphans."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.core.port import Boundary, Record
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.attempts import NewRun, new_run
from reflexr_graph.store.history import saved_checkpoint
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.payload_store import FilePayloadStore
from reflexr_graph.store.payload_sweep import sweep
from reflexr_graph.store.settings import StoreOptions
from tests.store.support import LEASE_MS, new_token, start
from tests.store.test_payloads import MARKER, every_value, spec

OFFLOAD = 4096


def big_state() -> str:
    # Hex of random bytes: compresses to about half, so the file is large too.
    return json.dumps({"notes": [MARKER], "text": os.urandom(100_000).hex()})


def files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def blobs(tmp_path: Path) -> FilePayloadStore:
    return FilePayloadStore.from_url(f"file://{tmp_path}/payloads")


def store_with(redis_url: str, blobs: FilePayloadStore | None, *ids: str, strict: bool = False) -> RedisStore:
    ring = KeyRing.parse(spec(*ids)) if ids else None
    return RedisStore.from_url(
        redis_url,
        options=StoreOptions(
            codec=PayloadCodec(ring, blobs, offload_bytes=OFFLOAD, max_offload_bytes=2**20, strict=strict)
        ),
    )


@pytest.fixture
def stores(redis_url: str, blobs: FilePayloadStore) -> Iterator[dict[str, RedisStore]]:
    made = {
        "k1": store_with(redis_url, blobs, "k1"),
        "plain": store_with(redis_url, blobs),
        "strict": store_with(redis_url, blobs, "k1", strict=True),
        "reader": store_with(redis_url, blobs, "k1"),
    }
    try:
        yield made
    finally:
        for s in made.values():
            s.close()


def _create(store: RedisStore, run_id: str, state: str) -> None:
    store.create_run(
        run_id, graph="demo", inputs_json="{}", state_json=state, max_attempts=3, dispatch_grace_ms=9
    )


@pytest.mark.parametrize("name", ["k1", "plain"])
def test_a_large_payload_is_offloaded_and_redis_keeps_only_its_reference(
    stores: dict[str, RedisStore], redis_client: redis.Redis, blobs: FilePayloadStore, name: str
) -> None:
    state = big_state()
    _create(stores[name], "run-o", state)
    kept = redis_client.hget(keys.run("run-o"), "state") or b""
    assert len(kept) < 200 and b"r:" in kept
    assert MARKER.encode() not in every_value(redis_client)
    (digest, data), *others = files(blobs.root).items()
    assert not others and digest.encode() in kept
    assert (MARKER.encode() in data) is False  # compressed (and, with k1, encrypted)
    claim = stores[name].claim("run-o", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.state_json == state


def test_offloaded_checkpoints_records_and_outputs_read_back(stores: dict[str, RedisStore]) -> None:
    store = stores["k1"]
    _create(store, "run-c", "{}")
    ctx = start(store, "run-c")
    big = big_state()
    store.save_checkpoint(ctx, Boundary(big, seq=1, next_node="b"))
    store.save_record(ctx, Record("call:x", big))
    assert store.load_checkpoint("run-c") == big
    assert store.load_records("run-c") == {"call:x": big}
    store.succeed(ctx, big)
    assert store.get("run-c").output == json.loads(big)
    assert store.read_checkpoint("run-c", 1).payload == big


def test_a_missing_payload_is_a_permanent_error_naming_the_run_and_the_payload(
    stores: dict[str, RedisStore], blobs: FilePayloadStore, redis_client: redis.Redis
) -> None:
    _create(stores["k1"], "run-m", big_state())
    (digest,) = files(blobs.root)
    blobs.path(digest).unlink()
    # Reading the run reads no inputs or state: not even a worker's strict store fails on it.
    assert stores["strict"].get("run-m").status.value == "queued"
    claim = stores["strict"].claim("run-m", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.claimed
    assert "run run-m" in claim.unreadable and digest in claim.unreadable and "missing" in claim.unreadable
    # A reader shows the value as missing, and never crashes.
    kept = (redis_client.hget(keys.run("run-m"), "state") or b"").decode()
    assert json.loads(stores["reader"].codec.decode(kept, "run-m")) == f"<payload {digest[:12]} missing>"


def test_a_corrupt_payload_is_a_permanent_error(
    stores: dict[str, RedisStore], blobs: FilePayloadStore
) -> None:
    _create(stores["k1"], "run-x", big_state())
    (digest,) = files(blobs.root)
    blobs.path(digest).write_bytes(b"not what was written")
    claim = stores["strict"].claim("run-x", new_token(), lease_ttl_ms=LEASE_MS)
    assert "run run-x" in claim.unreadable and "does not match its digest" in claim.unreadable


def test_a_payload_above_the_offload_limit_is_refused_clearly(stores: dict[str, RedisStore]) -> None:
    with pytest.raises(errors.PayloadTooLarge, match="above REFLEXR_MAX_OFFLOAD_BYTES"):
        _create(stores["k1"], "run-l", json.dumps("x" * (2**20 + 1)))


def test_the_sweep_deletes_only_old_files_no_run_refers_to(
    stores: dict[str, RedisStore], redis_client: redis.Redis, blobs: FilePayloadStore
) -> None:
    store = stores["k1"]
    _create(store, "run-keep", big_state())
    _create(store, "run-gone", big_state())
    kept_digest = store.codec.references((redis_client.hget(keys.run("run-keep"), "state") or b"").decode())
    redis_client.delete(*keys.run_keys("run-gone"))  # its retention passed
    assert len(files(blobs.root)) == 2
    assert sweep(store) == 0  # both are younger than the grace period
    assert sweep(store, grace_s=0) == 1
    assert list(files(blobs.root)) == [kept_digest]
    assert store.claim("run-keep", new_token(), lease_ttl_ms=LEASE_MS).state_json is not None


class ThreadNoting(FilePayloadStore):
    """A file payload store that notes the thread of each write and read."""

    threads: list[int]

    def put(self, data: bytes) -> str:
        self.threads.append(threading.get_ident())
        return super().put(data)

    def get(self, digest: str) -> bytes:
        self.threads.append(threading.get_ident())
        return super().get(digest)


def test_the_async_store_writes_and_reads_payload_files_off_the_event_loop(
    redis_url: str, blobs: FilePayloadStore, stores: dict[str, RedisStore]
) -> None:
    """AsyncClient's store: a payload file on a shared volume (or S3) is written and read in a
    thread, never on the event loop's, with the same result as the blocking store."""
    noting = ThreadNoting(blobs.root)
    noting.threads = []
    codec = PayloadCodec(stores["k1"].codec.ring, noting, offload_bytes=OFFLOAD)
    state = big_state()

    async def scenario() -> tuple[int, str, str]:
        store = AsyncStore.from_url(redis_url, options=StoreOptions(codec=codec))
        try:
            await store.do(new_run(NewRun("run-a", "demo", "{}", state, None, 3, 9)))
            ctx = start(stores["k1"], "run-a")
            stores["k1"].save_checkpoint(ctx, Boundary(state, seq=1, next_node="b"))
            saved = await store.do(saved_checkpoint("run-a", 1))
            return threading.get_ident(), saved.payload, saved.state_json or ""
        finally:
            await store.close()

    loop_thread, payload, initial = asyncio.run(scenario())
    assert payload == initial == state
    assert len(noting.threads) >= 3 and loop_thread not in noting.threads
