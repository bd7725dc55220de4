"""``rekey`` (store/rekey.py, cli/rekey.py): stored payloads rewritten under the first key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.payload_store import FilePayloadStore
from reflexr_graph.store.rekey import rekey
from reflexr_graph.store.settings import StoreOptions
from tests.store.test_payload_store import big_state
from tests.store.test_payloads import MARKER, _written, old_envelope, run_bound_envelope, spec
from tests.surfaces.cli_runner import run_cli


@pytest.fixture
def blobs(tmp_path: Path) -> FilePayloadStore:
    return FilePayloadStore(tmp_path / "payloads")


@pytest.fixture
def stores(redis_url: str, blobs: FilePayloadStore) -> Iterator[dict[str, RedisStore]]:
    def make(*ids: str) -> RedisStore:
        codec = PayloadCodec(KeyRing.parse(spec(*ids)) if ids else None, blobs, offload_bytes=4096)
        return RedisStore.from_url(redis_url, options=StoreOptions(codec=codec))

    made = {"k1": make("k1"), "k2k1": make("k2", "k1"), "k2": make("k2"), "plain": make()}
    try:
        yield made
    finally:
        for s in made.values():
            s.close()


def key_ids(r: redis.Redis, run_id: str) -> set[str]:
    """The key ids of the run's stored payloads ('' for a payload not encrypted)."""
    codec = PayloadCodec()
    values = [r.hget(keys.run(run_id), f) for f in ("inputs", "state", "output")]
    values += r.hvals(keys.ckpt(run_id)) + r.hvals(keys.mailbox(run_id))
    return {codec.key_of(v.decode()) or "" for v in values if v}


def test_rekey_rewrites_a_run_under_the_first_key_and_a_second_pass_does_nothing(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    run_id = _written(stores["k1"], big=True)
    stores["k1"].create_run(
        "run-big",
        graph="other",
        inputs_json="{}",
        state_json=big_state(),
        max_attempts=1,
        dispatch_grace_ms=1,
    )
    assert key_ids(redis_client, run_id) == {"k1"}
    first = rekey(stores["k2k1"])
    assert (first.runs, first.unreadable) == (2, {})
    assert first.rewritten >= 5
    assert key_ids(redis_client, run_id) == key_ids(redis_client, "run-big") == {"k2"}
    # Readable with k2 alone now: k1 can go.
    assert stores["k2"].get(run_id).output == {"answer": MARKER}
    assert json.loads(stores["k2"].read_checkpoint(run_id, 1).inputs_json)["secret"] == MARKER
    claimed = stores["k2"].claim("run-big", "t", lease_ttl_ms=1000)
    assert json.loads(claimed.state_json or "")["notes"] == [MARKER]
    assert rekey(stores["k2k1"]).rewritten == 0


def test_rekey_encrypts_what_was_written_before_keys_were_set(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    run_id = _written(stores["plain"])
    assert key_ids(redis_client, run_id) == {""}
    rekey(stores["k1"])
    assert key_ids(redis_client, run_id) == {"k1"}
    assert MARKER.encode() not in b"".join(redis_client.hvals(keys.ckpt(run_id)))
    assert stores["k1"].get(run_id).output == {"answer": MARKER}


def test_rekey_with_a_graph_leaves_the_other_graphs_runs(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    run_id = _written(stores["k1"])
    assert rekey(stores["k2k1"], graph="other").runs == 0
    assert key_ids(redis_client, run_id) == {"k1"}
    assert rekey(stores["k2k1"], graph="demo").runs == 1


def test_rekey_reports_runs_it_cannot_read_and_rewrites_the_rest(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    _written(stores["k1"])
    report = rekey(stores["k2"])
    assert list(report.unreadable) == ["run-p"] and "key k1" in report.unreadable["run-p"]
    assert key_ids(redis_client, "run-p") == {"k1"}


def test_the_rekey_command_asks_first_and_rewrites_with_yes(
    stores: dict[str, RedisStore], redis_client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _written(stores["k1"])
    env = {"REFLEXR_REDIS_URL": redis_url, "REFLEXR_PAYLOAD_KEYS": spec("k2", "k1")}
    declined = run_cli(["rekey"], env, monkeypatch, stdin="n\n")
    assert declined.returncode == 1 and key_ids(redis_client, run_id) == {"k1"}
    done = run_cli(["rekey", "--yes", "--json"], env, monkeypatch)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 1
    assert key_ids(redis_client, run_id) == {"k2"}
    unset = run_cli(["rekey", "--yes"], {"REFLEXR_REDIS_URL": redis_url}, monkeypatch)
    assert unset.returncode == 2 and "REFLEXR_PAYLOAD_KEYS is not set" in unset.stderr


def test_rekey_rewrites_a_payload_bound_to_its_key_id_alone_to_bind_its_run(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    stores["k1"].create_run("run-o", graph="demo", inputs_json="{}", max_attempts=1, dispatch_grace_ms=1)
    old = old_envelope(json.dumps({"secret": MARKER}))
    redis_client.hset(keys.run("run-o"), "inputs", old)
    assert rekey(stores["k1"]).rewritten == 1
    stored = (redis_client.hget(keys.run("run-o"), "inputs") or b"").decode()
    assert stored != old and stored.startswith('"rg:p1:eaf:k1:inputs:')
    strict = PayloadCodec(KeyRing.parse(spec("k1")), strict=True)
    assert json.loads(strict.decode(stored, "run-o", field="inputs")) == {"secret": MARKER}
    assert rekey(stores["k1"]).rewritten == 0


def test_a_payload_bound_to_its_run_alone_still_reads_and_rekey_binds_it_to_its_field(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    """A value written before the field was bound (flag 'a': key id and run id) reads as it did;
    rekey writes it again bound to its field too (flag 'f'), after which it reads only as that."""
    stores["k1"].create_run("run-a", graph="demo", inputs_json="{}", max_attempts=1, dispatch_grace_ms=1)
    old = run_bound_envelope(json.dumps({"secret": MARKER}), "run-a")
    redis_client.hset(keys.run("run-a"), "state", old)
    strict = PayloadCodec(KeyRing.parse(spec("k1")), strict=True)
    assert json.loads(strict.decode(old, "run-a", field="state")) == {"secret": MARKER}
    claim = RedisStore(redis_client, options=StoreOptions(codec=strict)).claim(
        "run-a", "token-a", lease_ttl_ms=30_000
    )
    assert claim.claimed and json.loads(claim.state_json or "null") == {"secret": MARKER}, claim

    assert rekey(stores["k1"]).rewritten == 1  # the state; the inputs were written bound already
    stored = (redis_client.hget(keys.run("run-a"), "state") or b"").decode()
    assert stored.startswith('"rg:p1:eaf:k1:state:')
    assert json.loads(strict.decode(stored, "run-a", field="state")) == {"secret": MARKER}
    with pytest.raises(errors.PayloadUnreadable, match="written as its state"):
        strict.decode(stored, "run-a", field="output")
    assert rekey(stores["k1"]).rewritten == 0
