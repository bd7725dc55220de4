"""How a payload is kept at rest: as it was, or compressed, encrypted and offloaded, in one place.

Every payload (inputs, state, checkpoints, outputs, branch and durable-call records, signal
values) passes :meth:`PayloadCodec.encode` on its way into Redis and :meth:`PayloadCodec.decode`
on its way out (``store/payload_args.py`` says where those are). An encoded payload is still
one JSON value, a string, so that a script that embeds it (``wait.lua``'s signal record) still
writes JSON::

    "rg:p1:<flags>:<key id>:<body>"

``flags`` holds ``z`` (zstd), ``e`` (AES-256-GCM under ``key id``), ``a`` (the associated data
binds the run id, not only the key id: :func:`associated_data`) and ``r`` (the body is the
SHA-256 of the bytes in the payload store, not the bytes themselves, which are base64 inline).
A value copied from one run's hash into another's does not decrypt there; one written before
``a`` (the key id alone) still reads, and ``rekey`` writes it again with ``a``.
With no keys and no payload store the codec keeps every payload as it was, byte for byte; only
a payload that itself starts like an envelope, or like a signal record around one, is wrapped, so
that no value is ever misread (:func:`looks_encoded`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import zstandard

from reflexr_graph import errors
from reflexr_graph.store.keys import valid_run_id
from reflexr_graph.store.payload_keys import KeyRing, WrongKey

PREFIX = '"rg:p1:'
PREFIX_BYTES = PREFIX.encode()
SIGNAL_RECORD = '{"signal":'
"""How wait.lua records a signal it took: the mailbox's (encoded) value inside this object."""
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

    @classmethod
    def parse(cls, text: str) -> Envelope | None:
        if not text.startswith(PREFIX) or not text.endswith('"'):
            return None
        parts = text[len(PREFIX) : -1].split(":", 2)
        return cls(*parts) if len(parts) == 3 else None

    def text(self) -> str:
        return f'{PREFIX}{self.flags}:{self.key_id}:{self.body}"'


class PayloadCodec:
    """Encodes payloads for Redis and decodes them back.

    ``strict`` (workers) raises :class:`errors.PayloadUnreadable` for a payload this process
    cannot read; otherwise (clients, the API, the CLI) such a value reads as a JSON string that
    says why, e.g. ``"<encrypted with key k1>"``, so listings never crash.
    """

    def __init__(
        self,
        ring: KeyRing | None = None,
        blobs: BlobStore | None = None,
        *,
        offload_bytes: int = 64 * 1024,
        max_offload_bytes: int = GIB,
        strict: bool = False,
    ) -> None:
        self.ring = ring
        self.blobs = blobs
        self.offload_bytes = offload_bytes
        self.max_offload_bytes = max_offload_bytes
        self.strict = strict
        self.active = ring is not None or blobs is not None
        """False: payloads are kept as they are (the default, and the hot path's fast case)."""

    # -- encoding ---------------------------------------------------------------------------------

    def encode(self, text: str, run_id: str = "") -> str:
        """``text`` (a payload's JSON) as Redis keeps it, in run ``run_id`` ('' when not known: an
        encrypted payload is then bound to its key id alone)."""
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
        return self._envelope(data, run_id).text()

    def _envelope(self, plain: bytes, run_id: str) -> Envelope:
        data, flags, key_id = plain, "", ""
        if len(plain) > COMPRESS_ABOVE:
            packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(plain)
            if len(packed) < len(plain):
                data, flags = packed, "z"
        if self.ring is not None:
            key_id = self.ring.primary
            bound = flags + ("ea" if valid_run_id(run_id) else "e")
            data, flags = self.ring.seal(data, associated_data(key_id, run_id, bound)), bound
        if self.blobs is not None and len(plain) > self.offload_bytes:
            return Envelope(flags + "r", key_id, self.blobs.put(data))
        return Envelope(flags, key_id, _b64(data))

    # -- decoding ---------------------------------------------------------------------------------

    def decode(self, text: str, run_id: str = "", *, strict: bool | None = None) -> str:
        """The payload's JSON from what Redis kept (a text that is no envelope is returned as is).

        ``strict`` overrides the codec's own for this call: a worker is strict only where it reads
        what it runs on (store/payload_args.py: STRICT_SCRIPTS)."""
        if text.startswith(SIGNAL_RECORD) and text.startswith(PREFIX, len(SIGNAL_RECORD)):
            inner = self.decode(text[len(SIGNAL_RECORD) : -1], run_id, strict=strict)
            return SIGNAL_RECORD + inner + "}"
        envelope = Envelope.parse(text)
        if envelope is None:
            return text
        try:
            return self._open(envelope, run_id).decode()
        except errors.PayloadUnreadable as exc:
            if self.strict if strict is None else strict:
                raise
            return json.dumps(f"<{exc.placeholder}>")

    def _open(self, envelope: Envelope, run_id: str) -> bytes:
        data = self._body(envelope, run_id)
        if "e" in envelope.flags:
            data = self._decrypt(envelope.key_id, data, run_id, envelope.flags)
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

    def _decrypt(self, key_id: str, data: bytes, run_id: str, flags: str) -> bytes:
        if self.ring is None or key_id not in self.ring.keys:
            held = "holds no keys" if self.ring is None else f"holds {', '.join(self.ring.keys)}"
            raise _unreadable(
                run_id,
                f"a stored payload is encrypted with key {key_id}, and REFLEXR_PAYLOAD_KEYS here {held}; "
                f"add key {key_id} to REFLEXR_PAYLOAD_KEYS, then replay the run",
                f"encrypted with key {key_id}",
            )
        try:
            return self.ring.open(key_id, data, associated_data(key_id, run_id, flags))
        except WrongKey:
            raise _unreadable(
                run_id,
                f"a stored payload does not decrypt with key {key_id}: it was altered, copied from another "
                f"run, or key {key_id} here is not the key it was written with",
                f"not readable with key {key_id}",
            ) from None

    def recode(self, text: str, run_id: str = "") -> str | None:
        """``text`` (a payload as stored) encoded again under the primary key, None when it is under
        it already; errors.PayloadUnreadable when it cannot be read here. For ``rekey``."""
        if self.ring is None:
            raise errors.SettingsError("REFLEXR_PAYLOAD_KEYS is not set: there is no key to encrypt under")
        if self.key_of(text) == self.ring.primary and self._bound(text):
            return None
        strict = PayloadCodec(
            self.ring,
            self.blobs,
            offload_bytes=self.offload_bytes,
            max_offload_bytes=self.max_offload_bytes,
            strict=True,
        )
        return self.encode(strict.decode(text, run_id), run_id)

    @staticmethod
    def _bound(text: str) -> bool:
        """Whether an encrypted payload's associated data binds its run (flag ``a``)."""
        envelope = Envelope.parse(text)
        if envelope is None and text.startswith(SIGNAL_RECORD):
            envelope = Envelope.parse(text[len(SIGNAL_RECORD) : -1])
        return envelope is not None and "a" in envelope.flags

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


def associated_data(key_id: str, run_id: str, flags: str) -> bytes:
    """What AES-GCM authenticates beside the payload: the key id, and with flag ``a`` the run id
    (a NUL between, which neither holds); payloads written before ``a`` have the key id alone."""
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unreadable(run_id: str, what: str, placeholder: str) -> errors.PayloadUnreadable:
    exc = errors.PayloadUnreadable(f"run {run_id or '(unknown)'}: {what}")
    exc.placeholder = placeholder
    return exc


PLAIN = PayloadCodec()
"""The codec of a store built without one: payloads as they are, others' envelopes shown as such."""
