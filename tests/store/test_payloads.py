"""Payloads at rest (store/payload_codec.py): encrypted, compressed, readable back, keys rotated."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator

import pytest
import redis

from reflexr_graph import errors, time_travel
from reflexr_graph.core.port import Boundary, Record
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.payload_codec import Envelope, PayloadCodec, associated_data
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.settings import StoreOptions
from tests.store.support import LEASE_MS, fail_once, make_run, new_token, start

MARKER = "zebra-marker-7f3a"


def spec(*ids: str) -> str:
    return ",".join(f"{i}:{KEYS[i]}" for i in ids)


KEYS = {name: base64.b64encode(os.urandom(32)).decode() for name in ("k1", "k2")}


def codec(*ids: str, strict: bool = False) -> PayloadCodec:
    return PayloadCodec(KeyRing.parse(spec(*ids)) if ids else None, strict=strict)


@pytest.fixture
def stores(redis_url: str) -> Iterator[dict[str, RedisStore]]:
    made = {
        "k1": RedisStore.from_url(redis_url, options=StoreOptions(codec=codec("k1"))),
        "k2k1": RedisStore.from_url(redis_url, options=StoreOptions(codec=codec("k2", "k1"))),
        "none": RedisStore.from_url(redis_url),
        "strict-k2": RedisStore.from_url(redis_url, options=StoreOptions(codec=codec("k2", strict=True))),
        "strict-k1": RedisStore.from_url(redis_url, options=StoreOptions(codec=codec("k1", strict=True))),
    }
    try:
        yield made
    finally:
        for s in made.values():
            s.close()


def every_value(r: redis.Redis) -> bytes:
    """Every key's name, DUMP and values, read by type: what anyone with Redis could read."""
    out = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key).decode()
        out.append(key)
        out.append(r.dump(key) or b"")
        if kind == "string":
            out.append(r.get(key) or b"")
        elif kind == "hash":
            out.extend(b"%s=%s" % pair for pair in r.hgetall(key).items())
        elif kind == "list":
            out.extend(r.lrange(key, 0, -1))
        elif kind == "set":
            out.extend(r.smembers(key))
        elif kind == "zset":
            out.extend(r.zrange(key, 0, -1))
        elif kind == "stream":
            out.extend(b"%s=%s" % kv for _, entry in r.xrange(key) for kv in entry.items())
    return b"\n".join(out)


def _written(store: RedisStore, big: bool = False) -> str:
    """A run with the marker in its inputs, state, a checkpoint, a record, a signal and its output."""
    filler = "x" * 5000 if big else ""
    store.create_run(
        "run-p",
        graph="demo",
        inputs_json=json.dumps({"secret": MARKER, "filler": filler}),
        state_json=json.dumps({"notes": [MARKER]}),
        max_attempts=3,
        dispatch_grace_ms=60_000,
    )
    ctx = start(store, "run-p")
    store.save_checkpoint(
        ctx, Boundary(json.dumps({"state": {"notes": [MARKER, filler]}}), seq=1, next_node="b")
    )
    store.save_record(ctx, Record("call:summarize", json.dumps({"result": MARKER})))
    store.signal("run-p", "approval", json.dumps({"by": MARKER}), dispatch_grace_ms=60_000)
    store.succeed(ctx, json.dumps({"answer": MARKER}))
    return "run-p"


@pytest.mark.parametrize("big", [False, True], ids=["small", "compressed"])
def test_with_keys_no_value_is_readable_in_redis(
    stores: dict[str, RedisStore], redis_client: redis.Redis, big: bool
) -> None:
    store = stores["k1"]
    run_id = _written(store, big)
    dump = every_value(redis_client)
    assert MARKER.encode() not in dump
    assert b"rg:p1:" in dump  # the payloads are there, as envelopes
    info = store.get(run_id)
    assert info.output == {"answer": MARKER}
    assert MARKER in (store.load_checkpoint(run_id) or "")
    saved = store.read_checkpoint(run_id, 1)
    assert json.loads(saved.inputs_json)["secret"] == MARKER
    assert json.loads(saved.state_json or "null") == {"notes": [MARKER]}


def test_without_keys_values_stay_as_they_were(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    """No keys, no payload store: Redis keeps each payload byte for byte as it was given."""
    make_run(stores["none"])
    assert redis_client.hget(keys.run("run-1"), "inputs") == b'{"n": 1}'
    ctx = start(stores["none"])
    stores["none"].save_checkpoint(ctx, Boundary('{"v": 1}', seq=1, next_node="b"))
    assert redis_client.hget(keys.ckpt("run-1"), "1") == b'{"v": 1}'


def test_a_value_that_looks_like_an_envelope_is_kept_as_given(stores: dict[str, RedisStore]) -> None:
    """Without keys a payload that itself starts like an envelope is wrapped, and reads back the same."""
    looks = json.dumps("rg:p1:e:k1:AAAA")
    stores["none"].create_run("run-l", graph="demo", inputs_json=looks, max_attempts=1, dispatch_grace_ms=1)
    claim = stores["none"].claim("run-l", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.inputs_json == looks


@pytest.mark.parametrize(
    "value",
    [
        json.dumps("rg:p1:e:k1:AAAA"),
        '{"signal":"rg:p1:::AAAA"}',
        '{"signal":"rg:p1:z:k1:AAAA", "more": 1}',
        '{"signal":"rg:p1:::e30="}',
    ],
    ids=["envelope", "signal-record", "signal-record-more", "signal-record-valid"],
)
def test_without_keys_every_value_decode_would_unwrap_reads_back_as_given(value: str) -> None:
    plain = PayloadCodec()
    assert plain.decode(plain.encode(value)) == value


def test_memo_records_and_signals_read_back_decoded(stores: dict[str, RedisStore]) -> None:
    store = stores["k1"]
    store.create_run("run-m", graph="demo", inputs_json="{}", max_attempts=3, dispatch_grace_ms=60_000)
    ctx = start(store, "run-m")
    store.save_record(ctx, Record("call:x", json.dumps({"result": MARKER})))
    store.signal("run-m", "approval", json.dumps({"by": MARKER}), dispatch_grace_ms=60_000)
    taken = store.wait(ctx, signal="approval", field="wait:approval", wake_at_ms=None)
    assert json.loads(taken.record or "") == {"signal": {"by": MARKER}}
    assert json.loads(store.load_records("run-m")["call:x"]) == {"result": MARKER}
    fail_once(store, ctx)
    again = stores["k1"].claim("run-m", new_token(), lease_ttl_ms=LEASE_MS)
    assert json.loads(again.records["call:x"]) == {"result": MARKER}
    assert json.loads(again.records["wait:approval"]) == {"signal": {"by": MARKER}}


def test_a_run_written_under_k1_is_read_once_k2_encrypts(stores: dict[str, RedisStore]) -> None:
    run_id = _written(stores["k1"])
    rotated = stores["k2k1"]
    assert rotated.get(run_id).output == {"answer": MARKER}
    assert json.loads(rotated.read_checkpoint(run_id, 1).inputs_json)["secret"] == MARKER


def test_a_reader_without_the_key_shows_values_as_encrypted(stores: dict[str, RedisStore]) -> None:
    run_id = _written(stores["k1"])
    assert stores["none"].get(run_id).output == "<encrypted with key k1>"
    assert stores["none"].list_runs()[0].output == "<encrypted with key k1>"
    assert json.loads(stores["none"].read_checkpoint(run_id, 1).inputs_json) == "<encrypted with key k1>"


def test_a_worker_without_the_key_claims_the_run_unreadable_naming_run_and_key(
    stores: dict[str, RedisStore],
) -> None:
    stores["k1"].create_run(
        "run-u", graph="demo", inputs_json=json.dumps({"s": MARKER}), max_attempts=3, dispatch_grace_ms=1
    )
    claim = stores["strict-k2"].claim("run-u", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.claimed
    assert "run run-u" in claim.unreadable and "key k1" in claim.unreadable
    assert MARKER not in claim.unreadable


def test_a_tampered_payload_is_unreadable_not_garbage(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    stores["k1"].create_run("run-t", graph="demo", inputs_json="{}", max_attempts=3, dispatch_grace_ms=9)
    stored = redis_client.hget(keys.run("run-t"), "inputs") or b""
    flipped = stored[:-3] + (b"A" if stored[-3:-2] != b"A" else b"B") + stored[-2:]
    redis_client.hset(keys.run("run-t"), "inputs", flipped)
    with pytest.raises(errors.PayloadUnreadable, match=r"run run-t.*key k1"):
        stores["strict-k2"].codec.decode(flipped.decode(), "run-t")
    strict_k1 = PayloadCodec(KeyRing.parse(spec("k1")), strict=True)
    with pytest.raises(errors.PayloadUnreadable, match="does not decrypt with key k1"):
        strict_k1.decode(flipped.decode(), "run-t")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("k1", "no valid key id"),
        ("k1:not base64!", "not valid base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "is 5 bytes, AES-256 needs 32"),
        (f"k1:{KEYS['k1']},k1:{KEYS['k2']}", "appears twice"),
    ],
    ids=["no-id", "not-base64", "short", "twice"],  # the keys are random: xdist needs stable ids
)
def test_a_bad_key_spec_says_what_to_fix_without_the_key(bad: str, says: str) -> None:
    with pytest.raises(errors.SettingsError, match=says) as caught:
        KeyRing.parse(bad)
    assert KEYS["k1"] not in str(caught.value)


def test_time_travel_without_the_key_refuses_naming_it(stores: dict[str, RedisStore]) -> None:
    """A fork or a checkpoint shown by a reader without the key is refused, never made from a placeholder."""
    run_id = _written(stores["k1"])
    saved = stores["none"].read_checkpoint(run_id, 1)
    with pytest.raises(
        errors.OperationRefused, match=r"checkpoint 1 cannot be read here \(encrypted with key k1"
    ):
        time_travel.document(run_id, saved)
    with pytest.raises(errors.StaleCheckpoint):  # with the key it is read (and is no CheckpointV1)
        time_travel.document(run_id, stores["k1"].read_checkpoint(run_id, 1))


PAYLOAD_FIELD_NAMES = {
    "inputs",
    "state",
    "output",
    "payload",
    "checkpoint",
    "value",
    "fork_checkpoint",
    "fork_output",
}


def test_every_contract_field_that_carries_a_payload_passes_the_codec() -> None:
    """A script argument named like a payload is encoded: a new script that writes one must name it
    among its registry entry's payloads (store/registry.py), or Redis would hold its values in plain
    text."""
    from reflexr_graph.store import registry
    from reflexr_graph.store.payload_args import PAYLOAD_ARGV

    for entry in registry.ENTRIES:
        named = [name for name in entry.arg_names if name in PAYLOAD_FIELD_NAMES]
        assert set(named) <= set(entry.payloads), (entry.name, named)
        index = {name: entry.first_arg + i for i, name in enumerate(entry.arg_names)}
        assert {index[name] for name in named} <= {i for i, _ in PAYLOAD_ARGV.get(entry.name, ())}


def test_a_value_copied_into_another_run_does_not_decrypt(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    """The associated data binds the run: a ciphertext moved from one run's hash to another's (by
    anyone who can write Redis) is refused there, not read as that run's data."""
    strict = codec("k1", strict=True)
    sealed = strict.encode(json.dumps({"secret": MARKER}), "run-a")
    assert json.loads(strict.decode(sealed, "run-a")) == {"secret": MARKER}
    with pytest.raises(errors.PayloadUnreadable, match="copied from another run"):
        strict.decode(sealed, "run-b")
    for run_id in ("run-a", "run-b"):
        stores["k1"].create_run(
            run_id, graph="demo", inputs_json=json.dumps({"who": run_id}), max_attempts=1, dispatch_grace_ms=1
        )
    # Encrypted, the inputs are longer than a listpack value: a key of their own (keys.inputs).
    redis_client.set(keys.inputs("run-b"), redis_client.get(keys.inputs("run-a")) or b"", keepttl=True)
    claim = stores["strict-k1"].claim("run-b", new_token(), lease_ttl_ms=LEASE_MS)
    assert "run run-b" in claim.unreadable and "copied from another run" in claim.unreadable
    assert json.loads(stores["k1"].claim("run-a", new_token(), lease_ttl_ms=LEASE_MS).inputs_json) == {
        "who": "run-a"
    }


def old_envelope(value: str, key_id: str = "k1") -> str:
    """``value`` encrypted as releases before the run binding wrote it: the key id alone as AAD."""
    ring = KeyRing.parse(spec(key_id))
    return Envelope("e", key_id, base64.b64encode(ring.seal(value.encode(), key_id.encode())).decode()).text()


def run_bound_envelope(value: str, run_id: str, key_id: str = "k1") -> str:
    """``value`` encrypted as releases before the field binding wrote it: key id and run id as AAD."""
    ring = KeyRing.parse(spec(key_id))
    sealed = ring.seal(value.encode(), associated_data(key_id, run_id, "ea"))
    return Envelope("ea", key_id, base64.b64encode(sealed).decode()).text()


def test_a_value_copied_into_another_field_of_its_run_does_not_decrypt(
    stores: dict[str, RedisStore], redis_client: redis.Redis
) -> None:
    """The associated data binds the field too: a run's inputs copied over its state, or its state
    over its output, by anyone who can write Redis, are refused there with one line naming both
    fields and no value, not read as the run's state or output."""
    store = stores["k1"]
    store.create_run(
        "run-f",
        graph="demo",
        inputs_json=json.dumps({"secret": MARKER}),
        state_json=json.dumps({"mine": MARKER}),
        max_attempts=1,
        dispatch_grace_ms=1,
    )
    # Encrypted, the inputs are longer than a listpack value: a key of their own (keys.inputs).
    redis_client.hset(keys.run("run-f"), "state", redis_client.get(keys.inputs("run-f")) or b"")
    claim = stores["strict-k1"].claim("run-f", new_token(), lease_ttl_ms=LEASE_MS)
    assert claim.unreadable == (
        "run run-f: a stored payload read as the run's state does not decrypt: it was written as its "
        "inputs (copied from another field of the run, or altered); restore the field, then replay the run"
    )
    assert MARKER not in claim.unreadable

    run_id = _written(store)
    redis_client.hset(keys.run(run_id), "output", redis_client.hget(keys.run(run_id), "state") or b"")
    assert store.get(run_id).output == "<copied from the run's state>"
    stored = (redis_client.hget(keys.run(run_id), "output") or b"").decode()
    with pytest.raises(errors.PayloadUnreadable, match="read as the run's output does not decrypt") as raised:
        stores["strict-k1"].codec.decode(stored, run_id, field="output")
    assert MARKER not in str(raised.value)
    # Where it was written, the same value reads.
    assert json.loads(stores["strict-k1"].codec.decode(stored, run_id, field="state")) == {"notes": [MARKER]}


def test_a_payload_bound_to_its_run_alone_still_reads() -> None:
    old = run_bound_envelope(json.dumps({"secret": MARKER}), "run-x")
    strict = codec("k1", strict=True)
    assert json.loads(strict.decode(old, "run-x", field="state")) == {"secret": MARKER}
    with pytest.raises(errors.PayloadUnreadable, match="copied from another run"):
        strict.decode(old, "run-y", field="state")


def test_a_payload_written_before_the_run_binding_still_reads() -> None:
    old = old_envelope(json.dumps({"secret": MARKER}))
    assert json.loads(codec("k1", strict=True).decode(old, "any-run")) == {"secret": MARKER}
