"""Keys written before the user-text namespace (store/keys.py: USER_TEXT) are moved to it, once
(store/keyspace_migration.py): tag indexes merged, idempotency keys renamed with their expiry, a
key of another type under an old name left alone."""

from __future__ import annotations

import redis

from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.keyspace_migration import migrate
from tests.store.support import make_run


def _old_idem(scope: str) -> str:
    return f"rg:{{s{keys.shard_of(scope)}}}:idem:{scope}"


def test_the_migration_moves_old_layout_keys_once(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store, "run-old", idempotency_key="k1")
    # As an older release wrote them: the scope and the tag in the key's name.
    raw.rename(keys.idem("demo:k1"), _old_idem("demo:k1"))
    raw.expire(_old_idem("demo:k1"), 500)
    raw.zadd("rg:{s0}:tag:team=a:run", {"run-old": 1})
    raw.zadd(keys.tag_index("team", "a:run", 0), {"run-new": 2})  # written since the upgrade
    raw.set(_old_idem("demo:k2"), "run-gone")
    raw.set(keys.idem("demo:k2"), "run-now")  # keyed since the upgrade: it owns the key now
    raw.hset("rg:{s0}:tag:x=y:run", "status", "queued")  # a run once named 'tag:x=y': left alone
    long_inputs = _old_idem("demo:k9:in")  # the long inputs of a run once named 'idem:demo:k9'
    raw.set(long_inputs, '{"text": "' + "x" * 80 + '"}')

    assert migrate(raw) == 3
    assert raw.get(keys.idem("demo:k1")) == b"run-old"
    assert 0 < raw.ttl(keys.idem("demo:k1")) <= 500
    assert raw.get(keys.idem("demo:k2")) == b"run-now"
    assert raw.zrange(keys.tag_index("team", "a:run", 0), 0, -1) == [b"run-old", b"run-new"]
    assert not raw.exists(_old_idem("demo:k1"), _old_idem("demo:k2"), "rg:{s0}:tag:team=a:run")
    assert raw.type("rg:{s0}:tag:x=y:run") == b"hash"
    assert raw.get(long_inputs) and not raw.exists(keys.idem("demo:k9:in"))
    assert raw.exists(keys.MIGRATED)

    # The key still names its run for a later enqueue, and a second pass does nothing.
    assert store.create_run(
        "run-again", graph="demo", inputs_json='{"n": 1}', state_json='{"count": 0}',
        idempotency_key="k1", max_attempts=3, dispatch_grace_ms=60_000,
    ) == ("run-old", False)  # fmt: skip
    raw.zadd("rg:{s0}:tag:late=1", {"run-x": 3})
    assert migrate(raw) == 0
    assert raw.exists("rg:{s0}:tag:late=1")
