"""Each per-run script gets only the prelude definitions it reaches (store/prelude.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable

import redis

from reflexr_graph.store import prelude, scripts

_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][A-Za-z0-9_, ]*?)\s*(?:=|\()", re.M)


def _code(text: str) -> str:
    return re.sub(r"--[^\n]*", "", re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", text))


def _defined(text: str) -> set[str]:
    """The names a Lua text defines at its top level."""
    return {n.strip() for group in _DEFINITION.findall(text) for n in group.split(",")}


def _each_uses_only_what_it_defines(r: redis.Redis, names_of: Iterable[str], helpers: set[str]) -> None:
    """Each script's full text defines every one of ``helpers`` it uses, and Redis compiles it."""
    for name in names_of:
        text = scripts.source(name)
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", _code(text))) & helpers
        assert used <= _defined(text), (name, used - _defined(text))
        r.script_load(text)


def test_every_prelude_name_a_script_uses_is_defined_in_its_text(redis_client: redis.Redis) -> None:
    """Checked apart from the cut itself: a name of the prelude that a script's text uses anywhere
    is defined in that text, and Redis compiles every script."""
    lib = scripts._read("_lib")
    names = _defined(lib)
    assert {"field", "flush", "emit", "set_status", "expire_all"} <= names
    _each_uses_only_what_it_defines(redis_client, scripts.PER_RUN, names)
    # The cut is real: a script that ends no run leaves out what ending one takes.
    assert "local function to_dead(" not in scripts.source("signal")
    assert len(scripts.source("signal")) < len(lib)


def test_every_history_helper_a_script_uses_is_defined_in_its_text(redis_client: redis.Redis) -> None:
    """The history's helpers (_history.lua) are cut by use too, and the prelude after them."""
    names = _defined(scripts._read("_history"))
    assert {"ckpt_plan", "ckpt_write", "ckpt_forget_all"} <= names
    _each_uses_only_what_it_defines(redis_client, sorted(scripts.WITH_HISTORY), names)
    # The claim reads the latest checkpoint and keeps no history: it carries no save's helpers.
    assert "local function ckpt_plan(" not in scripts.source("claim")
    assert "local function ckpt_forget_all(" in scripts.source("replay")


def test_a_prelude_with_a_loose_top_level_line_is_kept_whole() -> None:
    lib = "local A = 1\nlocal function f()\n  return A\nend\nB = 2\nlocal function g()\nend\n"
    assert prelude.needed(lib, "return 1") == lib
    assert prelude.needed("local A = 1\nlocal function f()\n  return A\nend\n", "f()").endswith("end")
    assert "local function g" not in prelude.needed(lib.replace("B = 2\n", ""), "return f()")
