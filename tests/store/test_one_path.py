"""One path to Redis: the store's concern modules (reads, recovery, limits, workers...) describe
each Redis request as a sans-IO operation (store/ops.py) and hand it to an executor; none holds
the client or the registered scripts itself, neither its own nor a store's it is given, nor calls a
client it is passed. So error translation, the clock sample and the
decoding of payloads happen in one place (StoreBase.handle, AsyncStore.handle, the hot path).

The test reads each module's source (ast), so a new direct call fails it before it runs."""

from __future__ import annotations

import ast
import asyncio
import re
from importlib import resources
from typing import Any

import redis

from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.contracts import AckDueArgs, LockReleaseArgs
from reflexr_graph.store.ops import Eval, Op, batch, cmd

EXECUTORS = {
    "base.py": "the blocking executor (StoreBase.handle, do): close, ping, the clock, subscribe",
    "aio.py": "the async executor (AsyncStore._answer)",
    "hot_path.py": "the held-connection executor of an attempt's saves and records",
    "scripts.py": "registers the scripts with a client and sends them; the executors call it",
    "connect.py": "builds the clients from a URL",
    "sentinel.py": "builds Sentinel clients and closes their sentinels' connections",
    "cluster.py": "builds Cluster clients and reads their layout",
    "connection_errors.py": "probes the server to say why a connection failed",
}
"""The modules that may hold a client, each with why: the executors and the connection code."""

CLIENT_ACCESS = {"_r", "client", "_scripts"}
"""The attributes through which a store object reaches its client or its scripts."""
CLIENT_TYPE = re.compile(r"\bRedis(?:Cluster)?\b")
"""An annotation that names a Redis client (``redis.Redis``, ``redis.asyncio.Redis``, a cluster's)."""


def _store_modules() -> dict[str, str]:
    folder = resources.files("reflexr_graph.store")
    return {f.name: f.read_text(encoding="utf-8") for f in folder.iterdir() if f.name.endswith(".py")}


def _modules_imported(tree: ast.AST) -> set[str]:
    """The names an import binds (``redis`` of ``import redis``): ``redis.client`` is a module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
    return found


def _client_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters of ``fn`` annotated as a Redis client."""
    every = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg for a in every if a.annotation and CLIENT_TYPE.search(ast.unparse(a.annotation))}


def _calls_on_clients(tree: ast.AST) -> list[int]:
    """The lines of each call of a method of a parameter annotated as a Redis client."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = _client_params(fn)
        found += [
            node.lineno
            for node in ast.walk(fn)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in params
        ]
    return found


def _client_access(source: str) -> list[int]:
    """The lines where a client is reached: ``<anything>._r``, ``.client`` or ``._scripts`` (read or
    set; not a module's ``redis.client``), and a call on a parameter annotated as a Redis client."""
    tree = ast.parse(source)
    modules = _modules_imported(tree)
    attributes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in CLIENT_ACCESS
        and not (isinstance(node.value, ast.Name) and node.value.id in modules)
    ]
    return sorted(set(attributes + _calls_on_clients(tree)))


def test_only_the_executors_reach_the_client() -> None:
    modules = _store_modules()
    found = {
        f"{name}:{line}"
        for name, source in modules.items()
        if name not in EXECUTORS
        for line in _client_access(source)
    }
    assert not found, f"{len(found)} direct uses of the client outside the executors: {sorted(found)}"


def test_every_exempt_module_exists() -> None:
    assert set(EXECUTORS) <= set(_store_modules()), "an exemption names a module that is gone"


def test_the_check_sees_each_kind_of_access() -> None:
    source = "\n".join(
        [
            "import redis",
            "class S:",
            "    def f(self):",
            "        self._r.get('k')",
            "        self._scripts('x', [], [])",
            "        return self.client",
            "    def g(self, c):",
            "        self._r = c",
            "        other._r.get('k')",
            "def h(store, client: redis.Redis, pipe: redis.client.Pipeline) -> redis.client.PubSub:",
            "    store.client.hvals('k')",
            "    client.scan_iter(match='*')",
            "    keep(client)",
            "    return make().client",
            "async def i(r: 'redis.asyncio.Redis | None') -> None:",
            "    await r.get('k')",
        ]
    )
    assert _client_access(source) == [4, 5, 6, 8, 9, 11, 12, 14, 16]


def _mixed(due_key: str) -> Op[list[Any]]:
    """A pipeline of two script calls around a command: ack_due takes the entry, the ZSCORE sees
    it gone, and lock_release finds no lock of this owner."""
    replies = yield batch(
        [
            Eval("ack_due", [due_key], AckDueArgs("run-1", repr(5.0)).argv()),
            cmd("zscore", due_key, "run-1"),
            Eval("lock_release", [keys.reaper_lock(0)], LockReleaseArgs("me").argv()),
        ]
    )
    return list(replies)


def test_a_batch_carries_script_calls_in_both_executors(
    store: RedisStore, raw: redis.Redis, redis_url: str
) -> None:
    """Both executors answer a Batch holding Evals in one pipeline, and load the scripts again
    when the server lost them (SCRIPT FLUSH: a restart, a replica promoted)."""
    due_key = keys.due(0)
    for flushed in (False, True):
        raw.zadd(due_key, {"run-1": 5.0})
        if flushed:
            raw.script_flush()
        assert store.do(_mixed(due_key)) == [1, None, 0]

    async def answered_async() -> list[list[Any]]:
        async_store = AsyncStore.from_url(redis_url)
        try:
            found = []
            for flushed in (False, True):
                raw.zadd(due_key, {"run-1": 5.0})
                if flushed:
                    raw.script_flush()
                found.append(await async_store.do(_mixed(due_key)))
            return found
        finally:
            await async_store.close()

    assert asyncio.run(answered_async()) == [[1, None, 0], [1, None, 0]]
