"""How a payload is kept at rest: as it was, or compressed, encrypted and offloaded, in one place.

Every payload (inputs, state, checkpoints, outputs, branch and durable-call records, signal
values) passes :meth:`PayloadCodec.encode` on its way into Redis and :meth:`PayloadCodec.decode`
on its way out (``store/payload_args.py`` says where those are). An encoded payload is still
one JSON value, a string, so that a script that embeds it (``wait.lua``'s signal record) still
writes JSON::

    "rg:p1:<flags>:<key id>:<body>"          "rg:p1:<flags>:<key id>:<field>:<body>" (flag f)

``flags`` holds ``z`` (zstd), ``e`` (AES-256-GCM under ``key id``), ``a`` (the associated data
binds the run id, not only the key id: :func:`associated_data`), ``f`` (it binds the field too:
which of the run's payloads the value is, :data:`FIELDS`, named in the envelope) and ``r`` (the
body is the SHA-256 of the bytes in the payload store, not the bytes themselves, which are base64
inline). A value copied from one run's hash into another's, or from one field of a run into
another (its state into its output), does not decrypt there: a reader that knows what it reads
(store/payload_args.py: fields_of) binds the field it expects, not the one the envelope names.
Values written before ``f`` (run id and key id) or before ``a`` (the key id alone) still read,
and ``rekey`` writes them again with ``f``.
With no keys and no payload store the codec keeps every payload as it was, byte for byte; only
a payload that itself starts like an envelope, or like a signal record around one, is wrapped, so
that no value is ever misread (:func:`looks_encoded`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

import zstandard

from reflexr_graph import errors
from reflexr_graph.store.keys import valid_run_id
from reflexr_graph.store.payload_keys import KeyRing, WrongKey

PREFIX = '"rg:p1:'
PREFIX_BYTES = PREFIX.encode()
SIGNAL_RECORD = '{"signal":'
"""How wait.lua records a signal it took: the mailbox's (encoded) value inside this object."""
FIELDS = frozenset({"inputs", "state", "output", "checkpoint", "signal", "record", "event"})
"""The fields an encrypted payload is bound to (``f``): the run hash's inputs, state and output,
a checkpoint, a signal's value (in the mailbox, then inside the wait's record, where wait.lua
moves it unopened), a record of the memo (a branch result, a durable call) and an event's value."""
COMPRESS_ABOVE = 512
"""Payloads up to this many bytes are not worth a zstd frame's overhead."""
ZSTD_LEVEL = 3
GIB = 1024**3


class BlobStore(Protocol):
    """Where offloaded payloads live, content-addressed by SHA-256 (``store/payload_store.py``)."""

    def put(self, data: bytes) -> str:
        """Keep ``data`` durably; its digest (hex)."""
        ...

    def get(self, digest: str) -> bytes:
        """The bytes kept under ``digest``; FileNotFoundError when none are, ValueError when corrupt."""
        ...

    @property
    def where(self) -> str:
        """The store's URL, for messages."""
        ...

    def entries(self) -> Iterator[tuple[str, float]]:
        """Every payload kept: (digest, when it was last written, epoch s)."""
        ...

    def delete_if_older(self, digest: str, cutoff: float) -> None:
        """Delete the payload of ``digest`` unless it was written (again) after ``cutoff``."""
        ...


@dataclass(frozen=True)
class Envelope:
    """An encoded payload's parts."""

    flags: str
    key_id: str
    body: str
    field: str = ""
    """With flag ``f``, the field the associated data binds (:data:`FIELDS`)."""

    @classmethod
    def parse(cls, text: str) -> Envelope | None:
        if not text.startswith(PREFIX) or not text.endswith('"'):
            return None
        parts = text[len(PREFIX) : -1].split(":", 2)
        if len(parts) != 3:
            return None
        if "f" not in parts[0]:
            return cls(*parts)
        field, sep, body = parts[2].partition(":")
        return cls(parts[0], parts[1], body, field) if sep else None

    def text(self) -> str:
        field = f"{self.field}:" if "f" in self.flags else ""
        return f'{PREFIX}{self.flags}:{self.key_id}:{field}{self.body}"'


@dataclass(frozen=True, eq=False, repr=False)  # compared by identity; no repr: its ring holds keys
class PayloadCodec:
    """Encodes payloads for Redis and decodes them back.

    ``strict`` (workers) raises :class:`errors.PayloadUnreadable` for a payload this process
    cannot read; otherwise (clients, the API, the CLI) such a value reads as a JSON string that
    says why, e.g. ``"<encrypted with key k1>"``, so listings never crash.
    """

    ring: KeyRing | None = None
    blobs: BlobStore | None = None
    _: KW_ONLY
    offload_bytes: int = 64 * 1024
    max_offload_bytes: int = GIB
    strict: bool = False
    active: bool = dataclasses.field(init=False)
    """False: payloads are kept as they are (the default, and the hot path's fast case)."""

    def __post_init__(self) -> None:
        # A field, not a property: the hot path reads it at every save.
        object.__setattr__(self, "active", self.ring is not None or self.blobs is not None)

    # -- encoding ---------------------------------------------------------------------------------

    def encode(self, text: str, run_id: str = "", field: str = "") -> str:
        """``text`` (a payload's JSON) as Redis keeps it, as ``field`` (:data:`FIELDS`) of run
        ``run_id`` ('' when not known: an encrypted payload is then bound to what is known)."""
        if not self.active:
            if looks_encoded(text):
                return Envelope("", "", _b64(text.encode())).text()
            return text
        data = text.encode()
        if self.blobs is not None and len(data) > self.max_offload_bytes:
            raise errors.PayloadTooLarge(
                f"a payload of {len(data)} bytes is above REFLEXR_MAX_OFFLOAD_BYTES "
                f"({self.max_offload_bytes}); "
                "keep such data elsewhere and pass a reference, or raise the limit"
            )
        return self._envelope(data, run_id, field).text()

    def _envelope(self, plain: bytes, run_id: str, field: str) -> Envelope:
        data, flags, key_id = plain, "", ""
        if len(plain) > COMPRESS_ABOVE:
            packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(plain)
            if len(packed) < len(plain):
                data, flags = packed, "z"
        if self.ring is not None:
            key_id = self.ring.primary
            if not valid_run_id(run_id):
                field, bound = "", flags + "e"
            else:
                field = field if field in FIELDS else ""
                bound = flags + ("eaf" if field else "ea")
            data, flags = self.ring.seal(data, associated_data(key_id, run_id, bound, field)), bound
        if self.blobs is not None and len(plain) > self.offload_bytes:
            return Envelope(flags + "r", key_id, self.blobs.put(data), field)
        return Envelope(flags, key_id, _b64(data), field)

    # -- decoding ---------------------------------------------------------------------------------

    def decode(self, text: str, run_id: str = "", *, strict: bool | None = None, field: str = "") -> str:
        """The payload's JSON from what Redis kept (a text that is no envelope is returned as is),
        read as ``field`` of the run ('' when the reader does not know which: then as the field
        the envelope names).

        ``strict`` overrides the codec's own for this call: a worker is strict only where it reads
        what it runs on (store/payload_args.py: STRICT_SCRIPTS)."""
        if text.startswith(SIGNAL_RECORD) and text.startswith(PREFIX, len(SIGNAL_RECORD)):
            # A signal's value, moved unopened from the mailbox into the wait's record (wait.lua).
            inner = self.decode(text[len(SIGNAL_RECORD) : -1], run_id, strict=strict, field="signal")
            return SIGNAL_RECORD + inner + "}"
        envelope = Envelope.parse(text)
        if envelope is None:
            return text
        try:
            return self._open(envelope, run_id, field).decode()
        except errors.PayloadUnreadable as exc:
            if self.strict if strict is None else strict:
                raise
            return json.dumps(f"<{exc.placeholder}>")

    def _open(self, envelope: Envelope, run_id: str, field: str) -> bytes:
        data = self._body(envelope, run_id)
        if "e" in envelope.flags:
            data = self._decrypt(envelope, data, run_id, field)
        if "z" in envelope.flags:
            try:
                data = zstandard.ZstdDecompressor().decompress(data)
            except zstandard.ZstdError:
                what = "a stored payload is corrupt (it does not decompress)"
                raise _unreadable(run_id, what, "corrupt payload") from None
        return data

    def _body(self, envelope: Envelope, run_id: str) -> bytes:
        if "r" not in envelope.flags:
            try:
                return base64.b64decode(envelope.body, validate=True)
            except (binascii.Error, ValueError):
                what = "a stored payload is corrupt (bad base64)"
                raise _unreadable(run_id, what, "corrupt payload") from None
        digest = envelope.body
        if self.blobs is None:
            raise _unreadable(
                run_id,
                f"payload {digest} is offloaded, and REFLEXR_PAYLOAD_STORE is not set here; set it to the "
                "payload store the workers use",
                f"offloaded payload {digest[:12]}",
            )
        try:
            return self.blobs.get(digest)
        except FileNotFoundError:
            raise _unreadable(
                run_id,
                f"payload {digest} is missing from the payload store {self.blobs.where}; restore it, "
                "then replay the run",
                f"payload {digest[:12]} missing",
            ) from None
        except ValueError:
            raise _unreadable(
                run_id,
                f"payload {digest} in the payload store {self.blobs.where} does not match its digest "
                "(corrupt); "
                "restore it, then replay the run",
                f"payload {digest[:12]} corrupt",
            ) from None

    def _decrypt(self, envelope: Envelope, data: bytes, run_id: str, field: str) -> bytes:
        key_id, flags = envelope.key_id, envelope.flags
        if self.ring is None or key_id not in self.ring.keys:
            held = "holds no keys" if self.ring is None else f"holds {', '.join(self.ring.keys)}"
            raise _unreadable(
                run_id,
                f"a stored payload is encrypted with key {key_id}, and REFLEXR_PAYLOAD_KEYS here {held}; "
                f"add key {key_id} to REFLEXR_PAYLOAD_KEYS, then replay the run",
                f"encrypted with key {key_id}",
            )
        # The field the reader expects, not the envelope's word for it: a value copied from another
        # field of the run does not open here.
        bound = (field or envelope.field) if "f" in flags else ""
        try:
            return self.ring.open(key_id, data, associated_data(key_id, run_id, flags, bound))
        except WrongKey:
            if bound != envelope.field:
                raise _unreadable(
                    run_id,
                    f"a stored payload read as the run's {_shown(field)} does not decrypt: it was "
                    f"written as its {_shown(envelope.field)} (copied from another field of the run, "
                    "or altered); restore the field, then replay the run",
                    f"copied from the run's {_shown(envelope.field)}",
                ) from None
            raise _unreadable(
                run_id,
                f"a stored payload does not decrypt with key {key_id}: it was altered, copied from another "
                f"run, or key {key_id} here is not the key it was written with",
                f"not readable with key {key_id}",
            ) from None

    def recode(self, text: str, run_id: str = "", field: str = "") -> str | None:
        """``text`` (a payload as stored as ``field`` of the run) encoded again under the primary
        key, bound to its run and field, None when it is so already; errors.PayloadUnreadable when
        it cannot be read here. For ``rekey``."""
        if self.ring is None:
            raise errors.SettingsError("REFLEXR_PAYLOAD_KEYS is not set: there is no key to encrypt under")
        if self.key_of(text) == self.ring.primary and self._bound(text, bool(field)):
            return None
        strict = PayloadCodec(
            self.ring,
            self.blobs,
            offload_bytes=self.offload_bytes,
            max_offload_bytes=self.max_offload_bytes,
            strict=True,
        )
        return self.encode(strict.decode(text, run_id, field=field), run_id, field)

    @staticmethod
    def _bound(text: str, to_field: bool) -> bool:
        """Whether an encrypted payload's associated data binds its run (flag ``a``) and, when
        ``to_field``, its field (``f``)."""
        envelope = Envelope.parse(text)
        if envelope is None and text.startswith(SIGNAL_RECORD):
            envelope = Envelope.parse(text[len(SIGNAL_RECORD) : -1])
        return envelope is not None and "a" in envelope.flags and ("f" in envelope.flags or not to_field)

    def key_of(self, text: str) -> str | None:
        """The key id a stored payload is encrypted with, '' when it is not, None when it is no envelope."""
        envelope = Envelope.parse(text)
        if envelope is None and text.startswith(SIGNAL_RECORD):
            envelope = Envelope.parse(text[len(SIGNAL_RECORD) : -1])
        if envelope is None:
            return None
        return envelope.key_id if "e" in envelope.flags else ""

    def references(self, text: str) -> str | None:
        """The payload store digest a stored payload refers to, if it does."""
        if text.startswith(SIGNAL_RECORD):
            text = text[len(SIGNAL_RECORD) : -1]
        envelope = Envelope.parse(text)
        return envelope.body if envelope is not None and "r" in envelope.flags else None


def associated_data(key_id: str, run_id: str, flags: str, field: str = "") -> bytes:
    """What AES-GCM authenticates beside the payload: the key id, with flag ``a`` the run id, and
    with ``f`` the field (a NUL between each, which none holds); payloads written before ``f``
    have the key id and run id, before ``a`` the key id alone."""
    if "f" in flags:
        return f"{key_id}\0{run_id}\0{field}".encode()
    return f"{key_id}\0{run_id}".encode() if "a" in flags else key_id.encode()


def looks_encoded(text: str) -> bool:
    """Whether :meth:`PayloadCodec.decode` would unwrap ``text``: an envelope, or a signal record
    around one. Such a payload is wrapped even when payloads are kept as they are, so it reads back
    as it was given."""
    return text.startswith(PREFIX) or (
        text.startswith(SIGNAL_RECORD) and text.startswith(PREFIX, len(SIGNAL_RECORD))
    )


def placeholder_of(text: str) -> str | None:
    """What a lenient decode put in place of a payload it could not read (``encrypted with key
    k1``), None for any other text."""
    if text.startswith('"<') and text.endswith('>"'):
        shown = json.loads(text)
        return shown[1:-1] if isinstance(shown, str) else None
    return None


def _shown(field: str) -> str:
    return field if field in FIELDS else "payload"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unreadable(run_id: str, what: str, placeholder: str) -> errors.PayloadUnreadable:
    exc = errors.PayloadUnreadable(f"run {run_id or '(unknown)'}: {what}")
    exc.placeholder = placeholder
    return exc


PLAIN = PayloadCodec()
"""The codec of a store built without one: payloads as they are, others' envelopes shown as such."""
