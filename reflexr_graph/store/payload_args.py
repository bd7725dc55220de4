"""Where payloads cross into and out of Redis, so the codec (``payload_codec.py``) sees each one.

Every payload is written by a Lua script, as one of its arguments: :data:`PAYLOAD_ARGV` names
them, by the field of the script's contract (``contracts.py``), so a field moved there moves here
too. Every reply is walked on its way back (:func:`decode_reply`): an envelope anywhere in it is
decoded, whichever command or script read it, so no read path can miss one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from reflexr_graph.store import contracts, keys
from reflexr_graph.store.ops import ScriptArg
from reflexr_graph.store.payload_codec import PREFIX_BYTES, SIGNAL_RECORD, PayloadCodec

_PRELUDE_ARGV = 3
"""The per-run scripts' ARGV[1..3] (run id, now, idempotency guess) come before their contract's."""
_SIGNAL_PREFIX = (SIGNAL_RECORD + PREFIX_BYTES.decode()).encode()


def _positions(args: type[contracts.Args], names: Sequence[str], offset: int) -> tuple[int, ...]:
    index = {f.name: i for i, f in enumerate(fields(args))}
    return tuple(offset + index[name] for name in names)


PAYLOAD_ARGV: dict[str, tuple[int, ...]] = {
    "create_run": _positions(
        contracts.CreateArgs, ("inputs", "state", "fork_checkpoint", "fork_output"), _PRELUDE_ARGV
    ),
    "dead_letter": _positions(contracts.DeadLetterArgs, ("inputs", "state"), _PRELUDE_ARGV),
    "save_checkpoint": _positions(contracts.SaveArgs, ("payload",), 0),
    "succeed": _positions(contracts.SucceedArgs, ("output", "checkpoint"), _PRELUDE_ARGV),
    "signal": _positions(contracts.SignalArgs, ("value",), _PRELUDE_ARGV),
    "upgrade": _positions(contracts.UpgradeArgs, ("checkpoint",), _PRELUDE_ARGV),
    "record": (2,),  # record.lua: ARGV[3], the record's JSON
}
"""Script name -> the 0-based positions of its arguments that are payloads."""


def _emitted_values(args: Sequence[ScriptArg]) -> tuple[int, ...]:
    """emit.lua's payloads: the value of each item of the batch, after its EmitArgs."""
    first = len(fields(contracts.EmitArgs)) + contracts.EMIT_ITEM_VALUE
    return tuple(range(first, len(args), contracts.EMIT_ITEM_ARGS))


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
    for i in positions:
        value = encoded[i]
        if isinstance(value, str) and value:
            encoded[i] = codec.encode(value, run_id)
    return encoded


def _is_envelope(value: bytes | str) -> bool:
    raw = value.encode() if isinstance(value, str) else value
    return raw.startswith(PREFIX_BYTES) or raw.startswith(_SIGNAL_PREFIX)


STRICT_SCRIPTS = frozenset({"claim", "wait"})
"""The replies an attempt runs on (inputs, state, checkpoint, records; a signal's value): a strict
codec (a worker's) raises errors.PayloadUnreadable for one it cannot read. Any other read (a run's
output for a log line, a listing) shows such a value as a placeholder, in a worker too."""
SHOWN_HASH_FIELDS = frozenset({"output", b"output", "v", b"v"})
"""The payload fields of a hash read (HGETALL of run hashes) or of a stream entry that are
decoded: RunInfo shows the output, and a reader of the run's stream each item's value (``v``,
emit.lua); the inputs and state RunInfo does not show stay as stored, so a listing never reads
their offloaded files."""


def decode_reply(codec: PayloadCodec, reply: Any, run_id: str = "", *, strict: bool = False) -> Any:
    """``reply`` with every envelope in it decoded (lists walked; of a hash, only
    :data:`SHOWN_HASH_FIELDS`), the rest as it was."""
    if isinstance(reply, bytes | str):
        if reply[:1] not in (b'"', b"{", '"', "{") or not _is_envelope(reply):
            return reply
        return codec.decode(reply.decode() if isinstance(reply, bytes) else reply, run_id, strict=strict)
    if isinstance(reply, list):
        return [decode_reply(codec, item, run_id, strict=strict) for item in reply]
    if isinstance(reply, tuple):  # redis-py gives a stream's entries as (id, fields) tuples
        return tuple(decode_reply(codec, item, run_id, strict=strict) for item in reply)
    if isinstance(reply, dict):
        return {
            key: decode_reply(codec, value, run_id, strict=strict) if key in SHOWN_HASH_FIELDS else value
            for key, value in reply.items()
        }
    return reply
