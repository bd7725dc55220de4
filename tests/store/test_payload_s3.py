"""The S3 payload store (store/payload_s3.py) against a real S3-compatible server (moto's, a process)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from reflexr_graph import errors
from reflexr_graph.config.payloads import payload_codec
from reflexr_graph.config.settings import load_settings
from reflexr_graph.store import RedisStore
from reflexr_graph.store.payload_s3 import S3PayloadStore
from reflexr_graph.store.payload_sweep import sweep
from reflexr_graph.store.settings import StoreOptions
from tests.s3_server import S3Server, s3_server
from tests.store.support import LEASE_MS, new_token
from tests.store.test_payload_store import big_state
from tests.store.test_payloads import MARKER, spec

__all__ = ["s3_server"]


@pytest.fixture
def s3_store(
    s3_server: S3Server, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[RedisStore, S3PayloadStore]]:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = s3_server.new_bucket()
    settings = load_settings(
        redis_url=redis_url, payload_store=f"s3://{bucket}/runs", payload_keys=spec("k1"), offload_bytes=4096
    )
    codec = payload_codec(settings, strict=True)
    assert isinstance(codec.blobs, S3PayloadStore)
    store = RedisStore.from_url(redis_url, options=StoreOptions(codec=codec))
    try:
        yield store, codec.blobs
    finally:
        store.close()


def _objects(blobs: S3PayloadStore) -> dict[str, bytes]:
    return {digest: blobs.get(digest) for digest, _ in blobs.entries()}


def test_a_large_payload_goes_to_s3_encrypted_and_reads_back(
    s3_store: tuple[RedisStore, S3PayloadStore],
) -> None:
    store, blobs = s3_store
    state = big_state()
    store.create_run(
        "run-s3", graph="demo", inputs_json="{}", state_json=state, max_attempts=3, dispatch_grace_ms=9
    )
    (digest, data), *others = _objects(blobs).items()
    assert not others and MARKER.encode() not in data
    assert blobs.key(digest) == f"runs/{digest[:2]}/{digest}"
    assert store.claim("run-s3", new_token(), lease_ttl_ms=LEASE_MS).state_json == state


def test_a_payload_missing_from_s3_is_a_permanent_error_naming_it(
    s3_store: tuple[RedisStore, S3PayloadStore],
) -> None:
    store, blobs = s3_store
    store.create_run("run-m", graph="demo", inputs_json=big_state(), max_attempts=3, dispatch_grace_ms=9)
    (digest,) = _objects(blobs)
    blobs.delete_if_older(digest, cutoff=float("inf"))
    claim = store.claim("run-m", new_token(), lease_ttl_ms=LEASE_MS)
    assert "run run-m" in claim.unreadable and digest in claim.unreadable and "s3://" in claim.unreadable


def test_the_sweep_deletes_s3_objects_no_run_refers_to(s3_store: tuple[RedisStore, S3PayloadStore]) -> None:
    store, blobs = s3_store
    store.create_run("run-a", graph="demo", inputs_json=big_state(), max_attempts=3, dispatch_grace_ms=9)
    orphan = blobs.put(b"written, and its script never ran")
    assert sweep(store) == 0
    assert sweep(store, grace_s=-5) == 1
    assert orphan not in _objects(blobs) and len(_objects(blobs)) == 1


def test_an_unreachable_s3_is_store_unavailable(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    blobs = S3PayloadStore("nowhere")
    with pytest.raises(errors.StoreUnavailable, match="payload store s3://nowhere"):
        blobs.put(json.dumps({"a": 1}).encode())
