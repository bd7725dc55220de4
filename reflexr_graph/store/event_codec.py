"""How run events are stored compactly in their stream, and read back under their public names.

An event is stored as one stream field, ``e``, whose value is the event's short code, its time
(epoch ms) and its values, joined by the ASCII unit separator, without the field names. Redis
stores a stream entry's field names once per node when they repeat the first entry's, so with
one field per entry every entry after the first costs only its values. The names come back
here, from :data:`SCHEMAS`, so every reader (``Client.events``, the CLI, the HTTP API, the
console) sees the same ``type`` and ``fields`` as before.

The Lua side is ``lua/_lib.lua`` (``EVENT_CODES``, ``emit``), and ``lua/save_checkpoint.lua`` and
``lua/limit_acquire.lua``, which write their own;
``tests/store/test_event_codec.py`` checks every ``emit`` call there against :data:`SCHEMAS`.
An event type with no code (a script added later) is written the long way, ``type``, ``at``
and its named fields, which :func:`decode` reads too, as it reads streams written before.
"""

from __future__ import annotations

from collections.abc import Mapping

FIELD = "e"
"""The one stream field a compact event is stored in."""
SEP = "\x1f"
"""Between the code, the time and the values (ASCII unit separator, never in a code or a name)."""

SCHEMAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "q": ("run_enqueued", ("graph",)),
    "s": ("attempt_started", ("attempt", "worker")),
    "p": ("run_progressed", ("seq", "next_node", "size")),
    "k": ("boundaries_skipped", ("count", "kinds")),
    "u": ("work_reused", ("steps", "calls")),
    "f": ("attempt_failed", ("attempt", "reason", "error_type", "counted", "last_beat_at")),
    "d": ("run_dead_lettered", ("reason", "error_type")),
    "r": ("run_retrying", ("attempt", "reason", "due_at")),
    "o": ("run_succeeded", ("attempt", "seq", "size")),
    "c": ("run_cancelled", ("from_status", "by")),
    "y": ("run_replayed", ("from_start", "from_status", "seq", "dropped", "by")),
    "h": ("waiting_for_worker", ("graph", "until")),
    "g": ("signal_received", ("signal", "by")),
    "w": ("run_waiting", ("attempt", "signal", "wake_at")),
    "x": ("run_forked", ("from_run", "seq", "state_edited")),
    "l": ("limit_waited", ("node", "waited_ms", "key")),
    "z": ("cancel_requested", ("by",)),
    "v": ("waiting_for_version", ("version", "until")),
    "b": ("run_woken", ("version",)),
    "n": ("run_upgraded", ("from_version", "version", "how", "by")),
    "t": ("call_retried", ("node", "call", "try", "error_type", "delay_ms")),
    "a": ("upgrade_held", ("from_version", "version", "reason")),
}
"""Code -> (event type, its field names in the order the scripts write their values).

A field is only ever added at the end (as ``by``, who signalled, cancelled or replayed): events
stored before it carry fewer values, and read back without it.

An event may carry fewer values than its names (the reaper's ``attempt_failed`` has no error
type): only those are read back. Never reuse a code for another type: streams outlive deploys.
"""

CODES = {kind: code for code, (kind, _) in SCHEMAS.items()}
"""Event type -> code, as ``EVENT_CODES`` in ``lua/_lib.lua``."""


def decode(fields: Mapping[str, str]) -> tuple[str, int, dict[str, str]]:
    """``(type, at ms, fields)`` of one stream entry, compact or written the long way."""
    packed = fields.get(FIELD)
    if packed is None or "type" in fields:
        rest = dict(fields)
        kind = rest.pop("type", "")
        at = rest.pop("at", "")
        return kind, int(at or 0), rest
    code = packed.partition(SEP)[0]
    kind, names = SCHEMAS.get(code, (code, ()))
    # maxsplit: a value holding the separator stays whole in the last field, never shifts the rest.
    pieces = packed.split(SEP, len(names) + 1)
    at = pieces[1] if len(pieces) > 1 else ""
    return kind, int(at or 0), dict(zip(names, pieces[2:], strict=False))
