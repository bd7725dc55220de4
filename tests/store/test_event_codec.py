"""Compact event storage: every script's events decode back under their public names.

The Lua scripts write an event as its code and values only; ``store/event_codec.py`` holds the
names. These tests tie the two together by reading the scripts' source, and check in a real
Redis that the stored entries are compact and read back as the long form did.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from reflexr_graph.core.port import Boundary
from reflexr_graph.store import RedisStore, event_codec, keys
from reflexr_graph.store.records import run_event
from tests.store.support import fail_once, make_run, start

pytestmark = pytest.mark.timeout(30)

LUA = resources.files("reflexr_graph.store") / "lua"


def _lua_sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in LUA.iterdir() if p.name.endswith(".lua")}


def _call_args(source: str, start: int) -> list[str]:
    """The top-level, comma-separated arguments of the call whose '(' is at ``start``."""
    depth, quote, args, current = 0, "", [], ""
    for ch in source[start + 1 :]:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return [*args, current.strip()]
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        current += ch
    raise AssertionError("unbalanced call")


def _emits() -> list[tuple[str, str, list[str]]]:
    found = []
    for name, source in _lua_sources().items():
        # Calls whose type is a literal: the definition and the comments name it ``kind``.
        for match in re.finditer(r"(?<![\w.])emit\('", source):
            args = _call_args(source, match.end() - 2)
            literal = [a.strip("'") for a in args]
            found.append((name, literal[0], literal[1::2]))
    return found


def test_every_emit_writes_its_schema_fields_in_order() -> None:
    """Each emit's field names are its type's schema (or a prefix of it), in the same order."""
    emits = _emits()
    # Every type of the codec is written somewhere: the parse found them all (limit_waited is
    # written by _limit.lua's count_wait, checked below).
    assert {kind for _, kind, _ in emits} | {"limit_waited"} == set(event_codec.CODES)
    for script, kind, names in emits:
        code = event_codec.CODES.get(kind)
        assert code is not None, f"{script}: event {kind!r} has no code in event_codec.SCHEMAS"
        schema = event_codec.SCHEMAS[code][1]
        assert tuple(names) == schema[: len(names)], f"{script}: {kind} writes {names}, schema {schema}"


def test_lua_codes_match_the_codec() -> None:
    lib = _lua_sources()["_lib.lua"]
    table = re.search(r"local EVENT_CODES = \{(.*?)\n\}", lib, re.S)
    assert table is not None
    lua_codes = dict(re.findall(r"(\w+) = '(\w+)'", table.group(1)))
    assert lua_codes == event_codec.CODES


def test_save_checkpoint_writes_the_codec_codes() -> None:
    source = _lua_sources()["save_checkpoint.lua"]
    written = re.findall(r"'e',\s*'(\w)' \.\. US \.\. now((?: \.\. US \.\. [^ )]+)*)", source)
    by_code = {code: rest.count(".. US ..") for code, rest in written}
    for code, count in by_code.items():
        assert count == len(event_codec.SCHEMAS[code][1]), code
    assert set(by_code) == {"k", "u", "p"}


def test_a_limit_grant_writes_the_codec_form() -> None:
    source = _lua_sources()["_limit.lua"]
    written = re.search(r"'e',\s*table\.concat\(\{'(\w)', ([^}]*)\}, '\\31'\)", source)
    assert written is not None
    code, values = written.group(1), written.group(2).split(", ")
    assert event_codec.SCHEMAS[code][0] == "limit_waited"
    assert len(values) == 1 + len(event_codec.SCHEMAS[code][1]), "the time, then one value per name"


def test_decode_reads_the_long_form_and_odd_values() -> None:
    """Streams written before the compact form, an empty value, fewer values than names."""
    legacy = {"type": "run_progressed", "at": "1500", "seq": "2", "next_node": "b", "size": "9"}
    assert event_codec.decode(legacy) == ("run_progressed", 1500, {"seq": "2", "next_node": "b", "size": "9"})
    sep = event_codec.SEP
    assert event_codec.decode({"e": f"p{sep}7{sep}3{sep}{sep}12"}) == (
        "run_progressed", 7, {"seq": "3", "next_node": "", "size": "12"},
    )  # fmt: skip
    assert event_codec.decode({"e": f"f{sep}7{sep}2{sep}abandoned"}) == (
        "attempt_failed", 7, {"attempt": "2", "reason": "abandoned"},
    )  # fmt: skip
    # A separator inside the last value stays in it.
    assert event_codec.decode({"e": f"k{sep}7{sep}1{sep}a{sep}b"})[2] == {"count": "1", "kinds": f"a{sep}b"}


def test_stored_entries_are_compact_and_read_back_named(store: RedisStore, raw: redis.Redis) -> None:
    make_run(store)
    ctx = start(store)
    store.save_checkpoint(ctx, Boundary("{}", seq=1, next_node="b"))
    fail_once(store, ctx)
    # After the marker every stream starts with (keys.EVENTS_MARKER), which readers skip.
    entries = raw.xrange(keys.events("run-1"), min=f"({keys.EVENTS_MARKER}")
    assert all(set(fields) == {b"e"} for _, fields in entries)
    events = [run_event(i, f) for i, f in entries]
    assert [e.type for e in events] == [
        "run_enqueued", "attempt_started", "run_progressed", "attempt_failed", "run_retrying",
    ]  # fmt: skip
    assert events[2].fields == {"seq": "1", "next_node": "b", "size": "2"}
    assert set(events[3].fields) == {"attempt", "reason", "error_type", "counted"}
    assert events[0].at == 1_800_000_000.0


def test_a_new_run_stream_holds_no_preallocated_node(store: RedisStore, raw: redis.Redis) -> None:
    """The stream is written back shrunk at creation: a run's events cost what they hold, not 4 KB."""
    make_run(store)
    usage = raw.memory_usage(keys.events("run-1"), samples=0)
    assert usage is not None and usage < 1024
    assert [e.type for e in store.events("run-1")] == ["run_enqueued"]
    start(store)
    assert [e.type for e in store.events("run-1")] == ["run_enqueued", "attempt_started"]
