"""One attempt's own connection for the writes it makes at every step: saves and records.

A checkpoint save is one EVALSHA, but through redis-py's client it also paid the pool's
checkout (a lock, a ``select`` on the socket to see it is clean, the release), the retry layer
and the script wrapper: some 35 µs a call, a third of a round trip. An attempt makes its saves
one after the other, so it holds one connection of the client's pool for its whole life and
sends its EVALSHAs on it directly, with the script's hash, the keys, the run id and the token
packed once, when the attempt starts.

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
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from redis import exceptions as redis_errors

from reflexr_graph import clock
from reflexr_graph.core.port import NO_NOTES, AttemptContext, Lane, Notes
from reflexr_graph.store import cluster, connection_errors, keys, registry
from reflexr_graph.store.base import EVENTS_MAXLEN, StoreBase, _fenced
from reflexr_graph.store.contracts import Saved
from reflexr_graph.store.records import lane_args
from reflexr_graph.store.scripts import source

_SAVE_FIELDS = registry.entry("save_checkpoint").arg_names
_RECORD_FIELDS = registry.entry("record").arg_names
_SAVE_GIVEN = ("now_ms", "payload", "seq", "next_node")
"""A save's arguments that change per call, in SaveArgs' order; the notes' follow them."""
_NOTES_FIELDS = ("skipped", "skip_kinds", "reused_steps", "reused_calls")
_NO_NOTES_ARGS = {
    "skipped": b"%d" % NO_NOTES.skipped,
    "skip_kinds": NO_NOTES.skip_kinds.encode(),
    "reused_steps": b"%d" % NO_NOTES.reused_steps,
    "reused_calls": b"%d" % NO_NOTES.reused_calls,
}
_SAVED = {int(s): s for s in Saved}
"""save_checkpoint.lua's reply -> Saved, by a dict rather than the enum's call (a few hundred ns)."""
_INLINE_LIMIT = 16 * 1024
"""Above this a value is sent as its own chunk rather than copied into the command's bytes."""


def _bulk(data: bytes) -> bytes:
    """One RESP bulk string: what redis-py's packer writes for an argument."""
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _arg_bytes(value: object) -> bytes:
    # As contracts._arg: Lua sees strings, a flag '1' / '0', a missing value ''.
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if value is None:
        return b""
    return str(value).encode()


class _Call:
    """One script's EVALSHA on the held connection: the command's head (the hash and the keys) and
    the attempt's fixed arguments (run id, token...) packed once; only the others are packed per call,
    given in :attr:`given`'s order."""

    def __init__(
        self,
        name: str,
        sha: str,
        script_keys: Sequence[str],
        fields: Sequence[str],
        fixed: Mapping[str, bytes],
    ) -> None:
        self.name = name
        head = [b"EVALSHA", sha.encode(), b"%d" % len(script_keys), *(k.encode() for k in script_keys)]
        pending = b"*%d\r\n" % (len(head) + len(fields)) + b"".join(_bulk(part) for part in head)
        # Each argument given per call, after the packed bytes that come before it (the head, and
        # the fixed arguments since the one before), so a call appends two parts per argument.
        plan: list[bytes] = []
        given: list[str] = []
        for f in fields:
            if f in fixed:
                pending += _bulk(fixed[f])
            else:
                plan.append(pending)
                given.append(f)
                pending = b""
        self._plan = tuple(plan)
        self._tail = pending
        self.given = tuple(given)
        """The names of the arguments :meth:`pack` takes, in its order (ARGV order)."""

    def pack(self, values: Sequence[object]) -> list[bytes]:
        """The command as chunks to send: small values inline, a large payload in a chunk of its own.

        ``values`` are :attr:`given`'s, in that order: a tuple, not a mapping by name, so a save
        packs without a dict built and read per call."""
        chunks: list[bytes] = []
        buf: list[bytes] = []
        for before, value in zip(self._plan, values):  # noqa: B905 - the callers' tuples are checked once (_checked)
            buf.append(before)
            # str and int first, without a call: a save's arguments are those but for a missing node.
            if value.__class__ is str:
                data = value.encode()
            elif value.__class__ is int:
                data = b"%d" % value
            else:
                data = _arg_bytes(value)
            if len(data) > _INLINE_LIMIT:
                buf.append(b"$%d\r\n" % len(data))
                chunks.append(b"".join(buf))
                chunks.append(data)
                buf = [b"\r\n"]
            else:
                buf.append(b"$%d\r\n%s\r\n" % (len(data), data))
        buf.append(self._tail)
        chunks.append(b"".join(buf))
        return chunks


def _checked(call: _Call, given: tuple[str, ...]) -> _Call:
    """``call``, once it is known to take ``given``, the order its caller packs its values in: a
    contract whose fields moved fails here, when the attempt first uses the call, not as a wrong ARGV."""
    if call.given != given:
        raise AssertionError(f"{call.name}: packed as {given}, but its arguments are {call.given}")
    return call


def for_attempt(store: StoreBase, ctx: AttemptContext) -> HotPath | None:
    """The attempt's hot path, or None on a cluster store (its saves then take the store's path)."""
    return None if cluster.is_cluster(store.client) else HotPath(store, ctx)


class HotPath:
    """The per-step writes of one attempt (a save, a record), each one EVALSHA on a held connection.

    Use it as a context manager, or call :meth:`close`: the connection goes back to the pool.
    Calls may come from several threads (sync steps run in threads); one at a time is sent.
    """

    def __init__(self, store: StoreBase, ctx: AttemptContext) -> None:
        self._store = store
        self._ctx = ctx
        self._codec = store.scripts.codec
        self._pool = store.client.connection_pool
        self._conn: Any = None
        self._lock = threading.Lock()
        self._fixed = {
            "token": ctx.token.encode(),
            "events_cap": b"%d" % EVENTS_MAXLEN,
            "history": b"%d" % store.checkpoint_history,
        }

    # Each command is packed on its first use: an attempt that saves nothing (a resumed last step,
    # a one-step graph) or records nothing (most) packs neither its keys nor its head.
    @cached_property
    def _save(self) -> _Call:
        """A save with no notes (the common case): the notes' arguments are packed once, with the head."""
        return _checked(self._save_call({**self._fixed, **_NO_NOTES_ARGS}), _SAVE_GIVEN)

    @cached_property
    def _save_noted(self) -> _Call:
        """A save that hands the store notes (skipped boundaries, reused work)."""
        return _checked(self._save_call(self._fixed), (*_SAVE_GIVEN, *_NOTES_FIELDS))

    def _save_call(self, fixed: Mapping[str, bytes]) -> _Call:
        run_id = self._ctx.run_id
        return _Call(
            "save_checkpoint",
            self._store.scripts.sha("save_checkpoint"),
            [keys.run(run_id), keys.ckpt(run_id), keys.events(run_id), keys.memo(run_id)],
            _SAVE_FIELDS,
            fixed,
        )

    @cached_property
    def _record(self) -> _Call:
        run_id = self._ctx.run_id
        call = _Call(
            "record",
            self._store.scripts.sha("record"),
            [keys.run(run_id), keys.memo(run_id), keys.lanes(run_id)],
            _RECORD_FIELDS,
            self._fixed,
        )
        return _checked(call, ("field", "value", "lane", "times"))

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

    def save_checkpoint(
        self, payload: str, *, seq: int, next_node: str | None, notes: Notes = NO_NOTES
    ) -> bool:
        """As ``AttemptWrites.save_checkpoint``: True when a cancel was asked; FencedOut when the
        token lost the run."""
        # The payload encoded as Scripts does (store/payload_args.py).
        now_ms, data = clock.now_ms(), self._codec.encode(payload, self._ctx.run_id, "checkpoint")
        if notes is NO_NOTES:
            reply = self._call(self._save, (now_ms, data, seq, next_node))
        else:
            noted = (notes.skipped, notes.skip_kinds, notes.reused_steps, notes.reused_calls)
            reply = self._call(self._save_noted, (now_ms, data, seq, next_node, *noted))
        saved = _SAVED[int(reply)]
        if saved is Saved.FENCED:
            raise _fenced(self._ctx, "checkpoint")
        return saved is Saved.CANCEL_REQUESTED

    def save_record(self, field: str, value: str, lane: Lane | None = None) -> None:
        """As ``AttemptWrites.save_record``: FencedOut when the token lost the run."""
        lane_field, times = lane_args(self._ctx, lane)
        data = self._codec.encode(value, self._ctx.run_id, "record")
        if not self._call(self._record, (field, data, lane_field, times)):
            raise _fenced(self._ctx, "record")

    def _call(self, call: _Call, values: Sequence[object]) -> Any:
        command = call.pack(values)
        try:
            with self._lock:
                return self._send(call, command)
        except redis_errors.RedisError as exc:
            client = self._store.client
            translated = connection_errors.translate(exc, connection_errors.endpoint_of(client), client)
            if translated is None:
                raise
            raise translated from exc

    def _send(self, call: _Call, command: list[bytes]) -> Any:
        try:
            return self._round_trip(command)
        except redis_errors.NoScriptError:
            # The server lost its scripts (restarted, flushed): load this one and send it again.
            self._round_trip_of(lambda conn: conn.send_command("SCRIPT", "LOAD", source(call.name)))
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
