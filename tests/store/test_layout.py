"""The key layout and the rules the Lua scripts follow."""

from __future__ import annotations

import re
from hashlib import sha1
from importlib import resources

import redis
from redis.crc import key_slot

from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, cluster, keys, scripts

LUA_DIR = resources.files("reflexr_graph.store") / "lua"


def _lua_files() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in LUA_DIR.iterdir() if p.name.endswith(".lua")}


def test_a_runs_keys_and_its_shards_indexes_share_one_hash_tag() -> None:
    """On a cluster, every key of a run and every index of its shard carry the tag {s<shard>}: one
    cluster slot; so do the run's tag indexes, the shard's retries rollup and its held runs."""
    shard = keys.CLUSTER.of("0b7e-42")
    assert shard == keys.shard_of("0b7e-42")
    run_keys = keys.run_keys("0b7e-42")
    tag = f"rg:{{s{shard}}}"
    names = ("run", "ckpt", "events", "tb", "memo", "mailbox", "in", "stream", "lanes", "asks")
    assert run_keys == tuple(f"{tag}:0b7e-42:{k}" for k in names)
    indexes = [
        keys.all_runs(shard),
        keys.dead(shard),
        keys.leases(shard),
        keys.due(shard),
        keys.reaper_lock(shard),
    ]
    assert indexes == [f"{tag}:{name}" for name in ("all", "dead", "leases", "due", "reaper:lock")]
    assert keys.status_set(Status.DEAD, shard) == f"{tag}:status:dead"
    script_keys = keys.script_keys("0b7e-42", "0b7e-42", keys.CLUSTER)
    own = [
        keys.events_template(shard),
        keys.tag_index("team", "a", shard),
        keys.version_held("g", "v2", shard),
    ]
    assert len({key_slot(k.encode()) for k in [*script_keys, *own]}) == 1
    assert keys.retries(shard) in script_keys
    assert (
        keys.idem("g:order-1")
        == f"rg:{{s{keys.shard_of('g:order-1')}}}:#idem:{sha1(b'g:order-1').hexdigest()}"
    )


def test_a_standalone_store_keeps_its_indexes_in_one_shard() -> None:
    """A standalone store's per-run scripts name the same run keys, but shard 0's indexes: a
    listing or a reaper pass reads one index, as unsharded (its costs stay those of one Redis)."""
    assert keys.STANDALONE.all == range(1)
    assert {keys.STANDALONE.of(r) for r in ("a", "b", "0b7e-42", "order-9")} == {0}
    sample = keys.script_keys("0b7e-42", "0b7e-42", keys.STANDALONE)
    assert sample[0] == keys.run("0b7e-42")
    assert sample[5:9] == [keys.all_runs(0), keys.dead(0), keys.leases(0), keys.due(0)]


def test_the_store_kind_decides_the_shards(redis_client: redis.Redis) -> None:
    """One place decides it, from the client's kind (which follows the URL's)."""
    assert cluster.shards(redis_client) is keys.STANDALONE
    assert RedisStore(redis_client).shards is keys.STANDALONE


def test_a_keyed_runs_id_lands_in_its_keys_shard() -> None:
    """A producer's run id for an idempotency key is in the key's shard, so the per-run scripts,
    which check and expire the key, touch one slot on a cluster."""
    for n in range(20):
        run_id = keys.new_run_id("demo", f"order-{n}")
        scope = keys.idem_scope("demo", f"order-{n}")
        assert keys.shard_of(run_id) == keys.shard_of(scope)
        assert len({key_slot(k.encode()) for k in keys.script_keys(run_id, scope, keys.CLUSTER)}) == 1
    assert keys.shard_of(keys.new_run_id("demo", None)) in keys.CLUSTER.all


def test_the_control_slot_holds_graphs_presence_versions_schedules_and_the_quarantine() -> None:
    control = [keys.GRAPHS, keys.WORKERS, keys.worker("w1"), keys.served("demo"), keys.QUARANTINE]
    control += [keys.served_version("demo", "v1"), keys.versions("demo"), keys.held_versions(), keys.LIMITS]
    control += [keys.SCHEDULES, keys.SCHEDULE_NEXT, keys.SCHEDULE_LAST]
    assert len({key_slot(k.encode()) for k in [*control, keys.QUARANTINE_COUNTS]}) == 1


def test_every_lua_file_starts_with_its_keys_and_argv_map() -> None:
    """Each .lua file begins with a comment block: a prelude names the KEYS[i] and ARGV[i] it uses,
    a script its registry entry, whose names it describes (tests/store/test_contracts.py)."""
    files = _lua_files()
    assert set(files) == {
        "_lib.lua", "_history.lua", "_pass.lua", "_limit.lua", "_parent.lua",
        *(f"{n}.lua" for n in scripts.PER_RUN + scripts.STANDALONE),
    }  # fmt: skip
    for name, text in files.items():
        lines = text.splitlines()
        header = "\n".join(
            line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("--"))]
        )
        if name.startswith("_"):
            assert "KEYS[" in header and "ARGV[" in header, name
        else:
            assert f"store/registry.py's entry '{name.removesuffix('.lua')}'" in header, name
        code = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        for used in set(re.findall(r"(?:KEYS|ARGV)\[\d+\]", code)):
            assert used in header, (name, used)


def test_lua_never_reads_the_clock_or_builds_key_names() -> None:
    """Scripts take "now" from ARGV (never TIME: a test's clock fakes it) and get every key via KEYS
    (never a 'rg:' literal). The one TIME is the full beat's reply, the process's sample of the store's
    clock (clock.py): it compares nothing."""
    for name, text in _lua_files().items():
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        if name == "worker_beat.lua":
            code = code.replace("return redis.call('TIME')", "")
        assert "'TIME'" not in code and '"TIME"' not in code, name
        assert "rg:" not in code, name


def test_status_set_positions_match_the_lua_prelude() -> None:
    """_lib.lua reads the status sets at KEYS[10..16] in keys.STATUS_ORDER; the two must agree."""
    lib = (LUA_DIR / "_lib.lua").read_text(encoding="utf-8")
    positions = {status: int(idx) for status, idx in re.findall(r"\b([a-z]+) = KEYS\[(\d+)\]", lib)}
    assert positions == {status.value: 10 + i for i, status in enumerate(keys.STATUS_ORDER)}
    sample = keys.script_keys("r", "k", keys.CLUSTER)
    run, ckpt, events, tb, memo, mailbox, inputs, stream, lanes, asks = keys.run_keys("r")
    shard = keys.CLUSTER.of("r")
    indexes = [keys.all_runs(shard), keys.dead(shard), keys.leases(shard), keys.due(shard)]
    assert sample[:9] == [run, ckpt, events, tb, keys.idem("k"), *indexes]
    assert sample[9:16] == [
        keys.retries(shard) if s is Status.RETRYING else keys.status_set(s, shard) for s in keys.STATUS_ORDER
    ]
    assert re.search(r"local K_RETRIES = KEYS\[12\]", lib), "retrying's unwritten set holds the rollup"
    assert set(keys.STATUS_ORDER) == set(Status), "every status has its set"
    ended = keys.children_ended(shard)
    assert sample[16:] == [memo, mailbox, asks, lanes, ended, inputs, stream]
    assert keys.script_keys("r", "k", keys.CLUSTER, ["x"])[16:] == [
        memo,
        mailbox,
        "x",
        asks,
        lanes,
        ended,
        inputs,
        stream,
    ]
    assert re.search(r"local K_CHILDREN_ENDED = KEYS\[#KEYS - 2\]", lib)
    assert re.search(r"local K_INPUTS = KEYS\[#KEYS - 1\]", lib)
    assert re.search(r"local K_MEMO, K_MAILBOX = KEYS\[17\], KEYS\[18\]", lib)
