"""Each script's contract is one entry of store/registry.py, and its Lua reads its KEYS and ARGV by
the names that entry generates (scripts.source): every script has an entry, every generated name is
used, no script reads a KEYS or ARGV position by number, and no name is shadowed.

Those checks see coverage, not meaning. The meaning is checked through the real store on a real
Redis (tests/store/test_contract_meaning.py): each script, called with a distinct value in every
field, writes each value where its name says."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from reflexr_graph.store import contracts, registry, scripts

_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_, ]*?)\s*(?:=|\()", re.M)
_LOCAL = re.compile(r"\blocal\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_, ]*)")
_INDEXED = re.compile(r"\b(?:ARGV|KEYS)\[([^\]]*)\]")
ENTRIES = {entry.name: entry for entry in registry.ENTRIES}


def _code(text: str) -> str:
    """Lua text without its strings' contents and its comments."""
    return re.sub(r"--[^\n]*", "", re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", text))


def _header(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(lines[: next(i for i, line in enumerate(lines) if not line.startswith("--"))])


def test_every_script_has_one_entry() -> None:
    lua = resources.files("reflexr_graph.store") / "lua"
    files = {f.name.removesuffix(".lua") for f in lua.iterdir() if f.name.endswith(".lua")}
    assert {name for name in files if not name.startswith("_")} == set(ENTRIES)
    assert len(registry.ENTRIES) == len(ENTRIES), "one entry per script"
    assert set(scripts.PER_RUN) | set(scripts.STANDALONE) == set(ENTRIES)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_script_reads_its_keys_and_argv_by_the_names_its_entry_gives(name: str) -> None:
    entry = ENTRIES[name]
    body = scripts._read(name)
    code = _code(body)
    used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code))
    generated = entry.names()
    assert set(generated) - used == set(), "a name the entry generates that the script never reads"
    # Only a variadic tail is read by index, from its generated first index: never a number.
    indexes = _INDEXED.findall(code)
    assert [i for i in indexes if re.fullmatch(r"\s*\d+\s*", i)] == [], "a position read by number"
    if not (entry.keys_tail or entry.args_tail):
        assert indexes == [], "a script with no variadic tail reads KEYS and ARGV only by name"
    declared = {n.strip() for group in _LOCAL.findall(code) for n in group.split(",")}
    assert declared & set(generated) == set(), "a generated name declared again in the body"
    preludes = "\n".join(scripts._read(f"_{part}") for part in entry.preludes)
    defined = {n.strip() for group in _DEFINITION.findall(preludes) for n in group.split(",")}
    assert defined & set(generated) == set(), "a generated name that hides a prelude's definition"
    header = _header(body)
    assert f"store/registry.py's entry '{name}'" in header, "the header names its registry entry"
    assert not re.search(r"(?:ARGV|KEYS)\[\d", header), "the header restates a position the locals carry"


def test_each_script_compiles_with_its_generated_names(redis_client: redis.Redis) -> None:
    for name in ENTRIES:
        text = scripts.source(name)
        assert text.splitlines()[0].startswith("#!lua"), name
        redis_client.script_load(text)
    # A per-run script's names are locals of its main(), not upvalues (Lua 5.1: 60 at most).
    per_run = scripts.source("create_run")
    assert per_run.index("local function main()") < per_run.index("local graph = ARGV[4]")


def test_the_generated_names_follow_the_prelude_and_the_dataclass() -> None:
    create = registry.entry("create_run").names()
    assert (create["K_EXPECTED"], create["more_from"], create["graph"]) == ("KEYS[19]", "21", "ARGV[4]")
    save = registry.entry("save_checkpoint").names()
    assert (save["K_RUN"], save["slots_from"], save["now_ms"], save["members_from"]) == (
        "KEYS[1]",
        "5",
        "ARGV[1]",
        "12",
    )
    with pytest.raises(KeyError, match="no Lua script named 'nope'"):
        scripts.source("nope")


def test_payload_positions_come_from_the_entries() -> None:
    from reflexr_graph.store.payload_args import PAYLOAD_ARGV

    assert PAYLOAD_ARGV["record"] == ((2, "record"),)
    assert PAYLOAD_ARGV["save_checkpoint"] == ((2, "checkpoint"),)  # now_ms, token, payload
    assert dict(PAYLOAD_ARGV["create_run"])[4] == "inputs"  # the prelude's three, then graph


def test_argv_lays_flags_and_missing_values_out_as_lua_reads_them() -> None:
    args = contracts.ReplayArgs(from_start=True, from_seq=None)
    assert args.argv() == ["1", "", ""]  # and no one named as who replays
    assert contracts.CancelArgs(60, now=False).argv() == [60, "0", ""]
    assert contracts.CancelArgs(60, now=True, by="ana").argv() == [60, "1", "ana"]
