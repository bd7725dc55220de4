"""The key layout and the rules the Lua scripts follow."""

from __future__ import annotations

import re
from importlib import resources

from redis.crc import key_slot

from reflexr_graph.model import Status
from reflexr_graph.store import keys, scripts

LUA_DIR = resources.files("reflexr_graph.store") / "lua"


def _lua_files() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in LUA_DIR.iterdir() if p.name.endswith(".lua")}


def test_per_run_keys_share_one_hash_tag() -> None:
    """Every key of a run carries the tag {run_id}, so they hash to one cluster slot."""
    run_keys = keys.run_keys("0b7e-42")
    assert run_keys == (
        "rg:{0b7e-42}:run", "rg:{0b7e-42}:ckpt", "rg:{0b7e-42}:events", "rg:{0b7e-42}:tb",
        "rg:{0b7e-42}:memo", "rg:{0b7e-42}:mailbox", "rg:{0b7e-42}:stream",
    )  # fmt: skip
    assert len({key_slot(k.encode()) for k in run_keys}) == 1
    assert {keys.ALL, keys.DEAD, keys.LEASES, keys.DUE, keys.REAPER_LOCK} == {
        "rg:all", "rg:dead", "rg:leases", "rg:due", "rg:reaper:lock",
    }  # fmt: skip
    assert keys.idem("order-1") == "rg:idem:order-1"
    assert keys.status_set(Status.DEAD) == "rg:status:dead"


def test_every_lua_file_starts_with_its_keys_and_argv_map() -> None:
    """Each .lua file begins with a comment block naming the KEYS[i] and ARGV[i] it uses."""
    files = _lua_files()
    assert set(files) == {
        "_lib.lua", "_history.lua", "_pass.lua", *(f"{n}.lua" for n in scripts.PER_RUN + scripts.STANDALONE),
    }  # fmt: skip
    for name, text in files.items():
        lines = text.splitlines()
        header = "\n".join(
            line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("--"))]
        )
        assert "KEYS[" in header and "ARGV[" in header, name
        code = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        for used in set(re.findall(r"(?:KEYS|ARGV)\[\d+\]", code)):
            assert used in header, (name, used)


def test_lua_never_reads_the_clock_or_builds_key_names() -> None:
    """Scripts take "now" from ARGV (never TIME) and get every key via KEYS (never a 'rg:' literal)."""
    for name, text in _lua_files().items():
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        assert "'TIME'" not in code and '"TIME"' not in code, name
        assert "rg:" not in code, name


def test_status_set_positions_match_the_lua_prelude() -> None:
    """_lib.lua reads the status sets at KEYS[10..16] in keys.STATUS_ORDER; the two must agree."""
    lib = (LUA_DIR / "_lib.lua").read_text(encoding="utf-8")
    positions = {status: int(idx) for status, idx in re.findall(r"\b([a-z]+) = KEYS\[(\d+)\]", lib)}
    assert positions == {status.value: 10 + i for i, status in enumerate(keys.STATUS_ORDER)}
    sample = keys.script_keys("r", "k")
    run, ckpt, events, tb, memo, mailbox, stream = keys.run_keys("r")
    assert sample[:9] == [run, ckpt, events, tb, "rg:idem:k", "rg:all", "rg:dead", "rg:leases", "rg:due"]
    assert sample[9:16] == [
        keys.RETRIES if s is Status.RETRYING else keys.status_set(s) for s in keys.STATUS_ORDER
    ]
    assert re.search(r"local K_RETRIES = KEYS\[12\]", lib), "retrying's unwritten set holds the rollup"
    assert set(keys.STATUS_ORDER) == set(Status), "every status has its set"
    assert sample[16:] == [memo, mailbox, stream]
    assert keys.script_keys("r", "k", ["x"])[16:] == [memo, mailbox, "x", stream]
    assert re.search(r"local K_MEMO, K_MAILBOX = KEYS\[17\], KEYS\[18\]", lib)
