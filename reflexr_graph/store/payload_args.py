"""Where payloads cross into and out of Redis, so the codec (``payload_codec.py``) sees each one.

Every payload is written by a Lua script, as one of its arguments: each script's registry entry
(``registry.py``) names them, by the field of its contract, with the run's field each one is (an
encrypted payload is bound to it: payload_codec.FIELDS); :data:`PAYLOAD_ARGV` is where they are.
Every reply is walked on its way back (:func:`decode_reply`): an envelope anywhere in it is
decoded, whichever command or script read it, so no read path can miss one; where the request
says which field it reads (:func:`fields_of`), the payload is opened as that field, so a value
copied there from another field of the run does not decrypt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from reflexr_graph.store import contracts, keys, registry
from reflexr_graph.store.ops import Command, Eval, ScriptArg
from reflexr_graph.store.payload_codec import PREFIX_BYTES, SIGNAL_RECORD, PayloadCodec

_SIGNAL_PREFIX = (SIGNAL_RECORD + PREFIX_BYTES.decode()).encode()

PAYLOAD_ARGV: dict[str, tuple[tuple[int, str], ...]] = {
    entry.name: entry.payload_positions() for entry in registry.ENTRIES if entry.payloads
}
"""Script name -> the 0-based positions of its arguments that are payloads, each with the run's
field it is (payload_codec.FIELDS): the entries' ``payloads`` (store/registry.py)."""


def _emitted_values(args: Sequence[ScriptArg]) -> tuple[tuple[int, str], ...]:
    """emit.lua's payloads: the value of each item of the batch, after its EmitArgs."""
    first = len(fields(contracts.EmitArgs)) + contracts.EMIT_ITEM_VALUE
    return tuple((i, "event") for i in range(first, len(args), contracts.EMIT_ITEM_ARGS))


def encode_args(
    codec: PayloadCodec, name: str, args: Sequence[ScriptArg], script_keys: Sequence[str] = ()
) -> Sequence[ScriptArg]:
    """``args`` of script ``name`` with each payload encoded ('' stays '': no payload), bound to
    the run of its first key (every script that writes payloads takes the run hash first)."""
    positions = _emitted_values(args) if name == "emit" else PAYLOAD_ARGV.get(name)
    if positions is None:
        return args
    run_id = keys.run_of(script_keys[0]) if codec.ring is not None and script_keys else ""
    encoded = list(args)
    for i, field in positions:
        value = encoded[i]
        if isinstance(value, str) and value:
            encoded[i] = codec.encode(value, run_id, field)
    return encoded


def _is_envelope(value: bytes | str) -> bool:
    raw = value.encode() if isinstance(value, str) else value
    return raw.startswith(PREFIX_BYTES) or raw.startswith(_SIGNAL_PREFIX)


STRICT_SCRIPTS = frozenset({"claim", "wait"})
"""The replies an attempt runs on (inputs, state, checkpoint, records; a signal's value): a strict
codec (a worker's) raises errors.PayloadUnreadable for one it cannot read. Any other read (a run's
output for a log line, a listing) shows such a value as a placeholder, in a worker too."""
SHOWN_HASH_FIELDS = {"output": "output", b"output": "output", "v": "event", b"v": "event"}
"""The payload fields of a hash read (HGETALL of run hashes) or of a stream entry that are
decoded: RunInfo shows the output, and a reader of the run's stream each item's value (``v``,
emit.lua); the inputs and state RunInfo does not show stay as stored, so a listing never reads
their offloaded files. Each is read as the field it names (payload_codec.FIELDS)."""

Fields = Callable[[int], str]
"""Which field of the run the reply's item at a position is, '' when not known."""

_CLAIM_FIELDS = {
    i: name
    for i, f in enumerate(fields(contracts.ClaimReply))
    if (name := {"inputs": "inputs", "state": "state", "checkpoint": "checkpoint"}.get(f.name))
}
_SCRIPT_FIELDS: dict[str, dict[int, str]] = {
    "claim": _CLAIM_FIELDS,
    "wait": {1: "record"},  # {'recorded', record}
    # read_checkpoint.lua: {'ok', seq, ..., checkpoint, graph, inputs, state[, version, output]}
    "read_checkpoint": {6: "checkpoint", 8: "inputs", 9: "state", 11: "output"},
}


def _claim_field(i: int) -> str:
    # After the named part, the memo's field/value pairs: each value a record.
    if i >= contracts.ClaimReply.SIZE:
        return "record" if (i - contracts.ClaimReply.SIZE) % 2 else ""
    return _CLAIM_FIELDS.get(i, "")


def fields_of(request: Command | Eval) -> Fields | None:
    """Which field of its run each payload in the reply to ``request`` is, where the request says:
    a script's reply by position, a hash field read by its key and name, a long inputs' GET."""
    if isinstance(request, Eval):
        if request.name == "claim":
            return _claim_field
        known = _SCRIPT_FIELDS.get(request.name)
        return None if known is None else lambda i: known.get(i, "")
    if request.method not in ("hget", "hmget", "get") or not request.args:
        return None
    key, names = request.args[0], list(request.args[1:])
    if request.method == "hmget" and names and isinstance(names[0], list | tuple):
        names = [*names[0], *names[1:]]
    read = [keys.payload_field(key, name) for name in names] or [keys.payload_field(key)]
    return lambda i: read[i] if i < len(read) else ""


def decode_reply(
    codec: PayloadCodec,
    reply: Any,
    run_id: str = "",
    *,
    strict: bool = False,
    fields: Fields | None = None,
) -> Any:
    """``reply`` with every envelope in it decoded (lists walked; of a hash, only
    :data:`SHOWN_HASH_FIELDS`), the rest as it was; each as the field ``fields`` says it is (of
    a list, by position; of one value, position 0), or the hash field names."""
    if isinstance(reply, bytes | str):
        if reply[:1] not in (b'"', b"{", '"', "{") or not _is_envelope(reply):
            return reply
        field = fields(0) if fields is not None else ""
        shown = reply.decode() if isinstance(reply, bytes) else reply
        return codec.decode(shown, run_id, strict=strict, field=field)
    if isinstance(reply, list):
        if fields is None:
            return [decode_reply(codec, item, run_id, strict=strict) for item in reply]
        return [
            decode_reply(codec, item, run_id, strict=strict, fields=_at(fields(i)))
            for i, item in enumerate(reply)
        ]
    if isinstance(reply, tuple):  # redis-py gives a stream's entries as (id, fields) tuples
        return tuple(decode_reply(codec, item, run_id, strict=strict) for item in reply)
    if isinstance(reply, dict):
        return {
            key: decode_reply(codec, value, run_id, strict=strict, fields=_at(SHOWN_HASH_FIELDS[key]))
            if key in SHOWN_HASH_FIELDS
            else value
            for key, value in reply.items()
        }
    return reply


def _at(field: str) -> Fields:
    return lambda _i: field
