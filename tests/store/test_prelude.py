"""Each per-run script gets only the prelude definitions it reaches (store/prelude.py)."""

from __future__ import annotations

import re

import redis

from reflexr_graph.store import prelude, scripts

_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_, ]*?)\s*(?:=|\()", re.M)


def _code(text: str) -> str:
    return re.sub(r"--[^\n]*", "", re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", text))


def test_every_prelude_name_a_script_uses_is_defined_in_its_text(redis_client: redis.Redis) -> None:
    """Checked apart from the cut itself: a name of the prelude that a script's text uses anywhere
    is defined in that text, and Redis compiles every script."""
    lib = scripts._read("_lib")
    names = {n.strip() for group in _DEFINITION.findall(lib) for n in group.split(",")}
    assert {"field", "flush", "emit", "set_status", "expire_all"} <= names
    for name in scripts.PER_RUN:
        text = scripts.source(name)
        defined = {n.strip() for group in _DEFINITION.findall(text) for n in group.split(",")}
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _code(text))) & names
        assert used <= defined, (name, used - defined)
        redis_client.script_load(text)
    # The cut is real: a script that ends no run leaves out what ending one takes.
    assert "local function to_dead(" not in scripts.source("signal")
    assert len(scripts.source("signal")) < len(lib)


def test_every_history_helper_a_script_uses_is_defined_in_its_text(redis_client: redis.Redis) -> None:
    """The history's helpers (_history.lua) are cut by use too, and the prelude after them."""
    history = scripts._read("_history")
    names = {n.strip() for group in _DEFINITION.findall(history) for n in group.split(",")}
    assert {"ckpt_plan", "ckpt_write", "ckpt_forget_all"} <= names
    for name in scripts.WITH_HISTORY:
        text = scripts.source(name)
        defined = {n.strip() for group in _DEFINITION.findall(text) for n in group.split(",")}
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _code(text))) & names
        assert used <= defined, (name, used - defined)
        redis_client.script_load(text)
    # The claim reads the latest checkpoint and keeps no history: it carries no save's helpers.
    assert "local function ckpt_plan(" not in scripts.source("claim")
    assert "local function ckpt_forget_all(" in scripts.source("replay")


def test_a_prelude_with_a_loose_top_level_line_is_kept_whole() -> None:
    lib = "local A = 1\nlocal function f()\n  return A\nend\nB = 2\nlocal function g()\nend\n"
    assert prelude.needed(lib, "return 1") == lib
    assert prelude.needed("local A = 1\nlocal function f()\n  return A\nend\n", "f()").endswith("end")
    assert "local function g" not in prelude.needed(lib.replace("B = 2\n", ""), "return f()")
