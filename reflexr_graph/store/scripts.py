"""Loads the Lua scripts in ``lua/`` and registers them with a redis client.

Per-run scripts share a prelude, ``lua/_lib.lua``, which is prepended to them: Redis has
no ``require``, and writing each status transition once is what keeps them consistent. Each
per-run body is wrapped in a function, and the prelude's ``flush()`` runs after it, so every
path writes its changes of the run hash in one HSET. The scripts that save, list, read or go
back to checkpoints also get ``lua/_history.lua``, so the history is kept the same way by each.
What each script takes and answers, its keys and its preludes are one entry of
``store/registry.py``, from which its KEYS and ARGV get ``local`` names at the top of its body.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
import redis.asyncio
import redis.cluster
from redis.commands.core import AsyncScript, Script

from reflexr_graph.store import prelude, registry
from reflexr_graph.store.ops import Command, Eval, ScriptArg
from reflexr_graph.store.payload_args import encode_args
from reflexr_graph.store.payload_codec import PLAIN, PayloadCodec

PER_RUN: tuple[str, ...] = tuple(e.name for e in registry.ENTRIES if e.per_run)
"""Scripts that take ``keys.script_keys`` and the prelude's ARGV[1..3]."""
STANDALONE: tuple[str, ...] = tuple(e.name for e in registry.ENTRIES if not e.per_run)
"""Scripts with their own small KEYS layout; they get no ``_lib.lua`` prelude."""
WITH_HISTORY: frozenset[str] = frozenset(e.name for e in registry.ENTRIES if registry.HISTORY in e.preludes)
"""Scripts that get the checkpoint history's helpers (``lua/_history.lua``), after any prelude."""


def shebang(name: str) -> str:
    """The first line of script ``name``: its Redis 7 flags.

    A script that writes declares no ``allow-oom``: over maxmemory Redis refuses it before it
    runs, so it writes nothing, and the caller sees OOM (errors.StoreFull), an outage. Undeclared,
    a script was judged command by command as it ran: stopped at its first write that grows
    memory, or, once it had written anything (a ZREM, a DEL), let run on past maxmemory. One that
    writes nothing is ``no-writes``, so a full Redis still answers it. Redis reads flags since 7.0
    (store/server_version.py).
    """
    return "#!lua flags=no-writes" if registry.entry(name).read_only else "#!lua"


def _read(name: str) -> str:
    # importlib.resources rather than a path next to __file__: works from a zipped wheel too.
    return (resources.files("reflexr_graph.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")


@cache
def source(name: str) -> str:
    """The full text Redis runs for script ``name``: its preludes, then the ``local`` names of its
    KEYS and ARGV (registry.Script.locals) and its body."""
    entry = registry.entry(name)
    parts = [part for part in registry.PRELUDES if part in entry.preludes]
    # Inside the body, so that in a per-run script's main() they are its locals, not upvalues
    # (Lua 5.1 allows a function 60 of those).
    body = f"{entry.locals()}\n{_read(name)}"
    if entry.per_run:
        # A function, so that every return of the body comes back here and the run hash's
        # changes are written (_lib.lua: flush) whichever path the script took.
        body = f"local function main()\n{body}\nend\nlocal reply = main()\nflush()\nreturn reply\n"
    texts = [_read(f"_{part}") for part in parts]
    # Only the definitions of the prelude and the history's helpers that this script reaches:
    # Redis runs the whole text on every call, so each definition left out is work saved per
    # call (store/prelude.py). The history's are cut first: what they keep reaches the prelude.
    if registry.HISTORY in parts:
        at = parts.index(registry.HISTORY)
        texts[at] = prelude.needed(texts[at], "\n".join([*texts[at + 1 :], body]))
    if entry.per_run:
        texts[0] = prelude.needed(texts[0], "\n".join([*texts[1:], body]))
    # The flags line must come first: Redis reads a script's flags from its first line only.
    return "\n".join([shebang(name), *texts, body])


class Scripts:
    """The registered scripts of one client; each call is one EVALSHA once the script is cached.

    The client may be blocking or a ``redis.asyncio`` one, whose scripts' calls are awaited.
    Every payload among a call's arguments goes through ``codec`` (store/payload_args.py).
    """

    def __init__(self, client: redis.Redis | redis.asyncio.Redis, codec: PayloadCodec = PLAIN) -> None:
        self._client = client
        self.codec = codec
        self._scripts: dict[str, Script | AsyncScript] = {}

    def _script(self, name: str) -> Script | AsyncScript:
        """Script ``name`` registered with the client, at its first use: registering hashes its
        full text (some 1 ms for all of them), and a store made for one call, as a quarantined
        item's (store/quarantine.py), calls one script or none."""
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts.setdefault(name, self._client.register_script(source(name)))
        return script

    def __call__(self, name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        return self.call_encoded(name, keys, encode_args(self.codec, name, args, keys))

    def call_encoded(self, name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        """Call script ``name`` with arguments whose payloads are encoded already."""
        return self._script(name)(keys=keys, args=args)

    def sha(self, name: str) -> str:
        """The SHA1 of script ``name``'s full text, as EVALSHA names it."""
        return self._script(name).sha

    def queue(
        self, pipe: redis.client.Pipeline, name: str, keys: Sequence[str], args: Sequence[ScriptArg]
    ) -> None:
        """Add one call of script ``name`` to ``pipe`` (blocking client); the pipeline loads it if needed.

        A cluster pipeline refuses a script object's call (redis-py does not load scripts on its
        nodes), so it gets the plain EVALSHA, routed by its keys' slot: :meth:`pipelined` loads the
        scripts and sends them again if a node did not know one. The call names its node, found
        from the slot of its first key in the client's slot table: left to find it, redis-py 8.1's
        cluster pipeline asks a server ``COMMAND GETKEYS`` for each EVALSHA (a command with movable
        keys), a command more per script, where a single call computes the slot itself. A call
        that meets MOVED is sent again alone, routed afresh.
        """
        script = self._script(name)
        assert isinstance(script, Script)
        encoded = encode_args(self.codec, name, args, keys)
        if isinstance(pipe, redis.cluster.ClusterPipeline):
            target = {"target_nodes": pipe.get_node_from_key(keys[0])} if keys else {}
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *encoded, **target)
        else:
            script(keys=keys, args=encoded, client=pipe)

    def pipelined(self, requests: Sequence[Command | Eval], *, transaction: bool = False) -> list[Any]:
        """Send ``requests`` in one pipeline (blocking client), each script call as its EVALSHA
        (:meth:`queue`); their replies in order.

        A script a node did not know (NOSCRIPT: a node that restarted, a replica promoted) is
        loaded, with every other, and the pipeline sent again, once.
        """
        assert isinstance(self._client, redis.Redis | redis.cluster.RedisCluster)
        for tried in (False, True):
            pipe = self._client.pipeline(transaction=transaction)
            for request in requests:
                if isinstance(request, Eval):
                    self.queue(pipe, request.name, request.keys, request.args)
                else:
                    getattr(pipe, request.method)(*request.args, **request.kwargs)
            try:
                return list(pipe.execute())
            except redis.exceptions.NoScriptError:
                if tried:
                    raise
                self.preload()
        raise AssertionError("unreachable")

    def preload(self) -> None:
        """SCRIPT LOAD every script, so even the first call of each is one round trip (blocking client)."""
        assert not isinstance(self._client, redis.asyncio.Redis)
        for name in PER_RUN + STANDALONE:
            script = self._script(name)
            script.sha = self._client.script_load(script.script)

    async def preload_async(self) -> None:
        """SCRIPT LOAD every script (async client), as :meth:`preload`."""
        assert isinstance(self._client, redis.asyncio.Redis | redis.asyncio.RedisCluster)
        for name in PER_RUN + STANDALONE:
            script = self._script(name)
            script.sha = await self._client.script_load(script.script)
