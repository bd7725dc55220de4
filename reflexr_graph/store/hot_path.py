"""One attempt's own connection for the writes it makes at every step: saves and records.

A checkpoint save is one EVALSHA, but through redis-py's client it also paid the pool's
checkout (a lock, a ``select`` on the socket to see it is clean, the release), the retry layer
and the script wrapper: some 35 µs a call, a third of a round trip. An attempt makes its saves
one after the other, so it holds one connection of the client's pool for its whole life and
sends its EVALSHAs on it directly. It is the attempt's ``StepWriter`` (store/attempts.py): the
save and the record are written once, in ``RedisStore`` (their arguments built by attempts.py),
and hand it the keys and arguments they would hand the client. What a save repeats (the script's
hash, the keys, the run id, the token, the settings) is packed at the first save and reused while
it stays the same.

What the client's path gave stays: a connection error or timeout is reported as
``StoreUnavailable`` (``connection_errors.translate``, as ``translate_errors`` does), which
the attempt's fenced retry (fleet/fenced.py) retries while the lease holds; a stale socket is
replaced once at once, as redis-py's retry would; a script the server lost (a restart, a
``SCRIPT FLUSH``) is loaded again. The connection comes from the client's pool, and one that
fails goes back to it: the next call checks out another, and a Sentinel pool's checkout asks
the sentinels where the primary is now (a failover, or ``READONLY`` from a demoted one). A Redis Cluster
client has no one pool (a connection per node, and a moved slot follows a redirect), so an
attempt on a cluster store has no hot path: :func:`for_attempt` gives None, and its saves go
through the store's client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from redis import exceptions as redis_errors

from reflexr_graph.store import cluster, connection_errors
from reflexr_graph.store.attempts import Slots, StepWriter, given_back
from reflexr_graph.store.base import StoreBase
from reflexr_graph.store.ops import ScriptArg
from reflexr_graph.store.payload_args import encode_args
from reflexr_graph.store.scripts import source

_INLINE_LIMIT = 16 * 1024
"""Above this a value is sent as its own chunk rather than copied into the command's bytes."""
_NONE = repeat(None)


def _bulk(data: bytes) -> bytes:
    """One RESP bulk string: what redis-py's packer writes for an argument."""
    return b"$%d\r\n%s\r\n" % (len(data), data)


class _Packed(NamedTuple):
    """A script's last command on the held connection, so the next one packs only what changed:
    the head (the hash and the keys) while the keys are the same object (store/attempts.py builds
    them once per run), and each argument that is the same object as the last call's (the run id,
    the token, the settings: most of a save's)."""

    keys: Sequence[str]
    head: bytes
    args: Sequence[ScriptArg]
    parts: Sequence[bytes | None]
    """Each argument's bulk string, None for one sent as a chunk of its own (never reused)."""


def _head(sha: str, script_keys: Sequence[str]) -> bytes:
    """EVALSHA, the script's hash and its keys, as bulk strings."""
    parts = [b"EVALSHA", sha.encode(), b"%d" % len(script_keys), *(key.encode() for key in script_keys)]
    return b"".join(_bulk(part) for part in parts)


def _pack(last: _Packed, args: Sequence[ScriptArg]) -> tuple[list[bytes], _Packed]:
    """The command as chunks to send (small values inline, a large payload in a chunk of its own),
    and what the next call may reuse of it."""
    parts: list[bytes | None] = []
    large: dict[int, bytes] = {}
    # The last call's, when it had as many arguments (another call reuses none): an argument that is
    # the same object as the one at its place then is the same bytes.
    before, reused = (last.args, last.parts) if len(last.args) == len(args) else (_NONE, _NONE)
    for value, was, part in zip(args, before, reused):  # noqa: B905 - as long as args
        if part is None or value is not was:
            # str and int without a call: a save's arguments are those (Args.argv made a flag
            # '1' / '0' and a missing value '').
            if value.__class__ is str:
                data = value.encode()
            elif value.__class__ is int:
                data = b"%d" % value
            else:
                data = str(value).encode()
            if len(data) > _INLINE_LIMIT:
                large[len(parts)] = data
                part = None
            else:
                part = b"$%d\r\n%s\r\n" % (len(data), data)
        parts.append(part)
    start = b"*%d\r\n" % (3 + len(last.keys) + len(args)) + last.head
    packed = _Packed(last.keys, last.head, args, parts)
    if not large:
        return [start + b"".join(parts)], packed  # type: ignore[arg-type] # no None without a large one
    return _chunks(start, parts, large), packed


def _chunks(start: bytes, parts: Sequence[bytes | None], large: dict[int, bytes]) -> list[bytes]:
    """A command with large values: each sent as a chunk of its own, not copied into the others."""
    chunks: list[bytes] = []
    buf = [start]
    for i, part in enumerate(parts):
        if part is None:
            data = large[i]
            buf.append(b"$%d\r\n" % len(data))
            chunks += [b"".join(buf), data]
            buf = [b"\r\n"]
        else:
            buf.append(part)
    chunks.append(b"".join(buf))
    return chunks


def for_attempt(store: StoreBase) -> HotPath | None:
    """An attempt's hot path, or None on a cluster store (its saves then take the store's path)."""
    return None if cluster.is_cluster(store.client) else HotPath(store)


class HotPath(StepWriter):
    """The per-step writes of one attempt (a save, a record), each one EVALSHA on a held connection:
    a :class:`StepWriter` for ``RedisStore.save_checkpoint`` and ``save_record`` (``via``).

    Use it as a context manager, or call :meth:`close`: the connection goes back to the pool.
    Calls may come from several threads (sync steps run in threads); one at a time is sent.
    """

    def __init__(self, store: StoreBase) -> None:
        self._store = store
        self._codec = store.scripts.codec
        self._pool = store.client.connection_pool
        self._conn: Any = None
        self._lock = threading.Lock()
        self._packed: dict[str, _Packed] = {}
        """Each script's last command (:class:`_Packed`), replaced whole, so threads need no lock."""

    def write_step(
        self, name: str, script_keys: Sequence[str], args: Sequence[ScriptArg], returning: Slots = ()
    ) -> Any:
        """One EVALSHA of script ``name``; the slots ``returning`` are given back in the same call."""
        script_keys, args = given_back(script_keys, args, returning)
        last = self._packed.get(name)
        if last is None or last.keys is not script_keys:
            last = _Packed(script_keys, _head(self._store.scripts.sha(name), script_keys), (), ())
        # The payloads encoded as Scripts does (store/payload_args.py).
        command, self._packed[name] = _pack(last, encode_args(self._codec, name, args, script_keys))
        try:
            with self._lock:
                return self._send(name, command)
        except redis_errors.RedisError as exc:
            client = self._store.client
            translated = connection_errors.translate(exc, connection_errors.endpoint_of(client), client)
            if translated is None:
                raise
            raise translated from exc

    def __enter__(self) -> HotPath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Give the connection back to the client's pool."""
        with self._lock:
            if self._conn is not None:
                self._pool.release(self._conn)
                self._conn = None

    def _send(self, name: str, command: list[bytes]) -> Any:
        try:
            return self._round_trip(command)
        except redis_errors.NoScriptError:
            # The server lost its scripts (restarted, flushed): load this one and send it again.
            self._round_trip_of(lambda conn: conn.send_command("SCRIPT", "LOAD", source(name)))
            return self._round_trip(command)
        except redis_errors.ConnectionError:
            # A socket that went stale while held (the server closed it): one new connection at
            # once, as redis-py's retry would; a second failure is an outage, for the fenced retry.
            return self._round_trip(command)

    def _round_trip(self, command: list[bytes]) -> Any:
        return self._round_trip_of(lambda conn: conn.send_packed_command(command))

    def _round_trip_of(self, send: Callable[[Any], None]) -> Any:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._pool.get_connection()
        try:
            send(conn)
            return conn.read_response()
        except (redis_errors.ConnectionError, redis_errors.TimeoutError):
            self._drop(conn)
            raise

    def _drop(self, conn: Any) -> None:
        """Give a failed connection back, so the next call takes one from the pool anew.

        Not merely reconnected in place: a connection reconnects by itself to the address it had
        (redis-py's ``send_packed_command``), and only the pool's checkout asks the sentinels where
        the primary is now. Held across a failover, it went back to the old primary, a replica
        since, and every save was refused as read-only while the lease, renewed through the pool,
        held: the attempt waited forever."""
        self._conn = None
        conn.disconnect()
        self._pool.release(conn)
