"""The keys that encrypt payloads at rest (``REFLEXR_PAYLOAD_KEYS``): AES-256-GCM, by key id.

The spec is ``id:base64key[,id2:key2...]``, each key 32 bytes. The first key encrypts; every
key decrypts, so a key is rotated by putting the new one first and keeping the old one until
``reflexr-graph rekey`` has rewritten what it encrypted.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from reflexr_graph.errors import Kind, ReflexrError, SettingsError

_SETTING = "REFLEXR_PAYLOAD_KEYS"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
SPEC_HINT = (
    "REFLEXR_PAYLOAD_KEYS is 'id:base64key' pairs separated by commas, each key 32 random bytes "
    'in base64 (python -c "import os,base64; print(base64.b64encode(os.urandom(32)).decode())"), '
    "each id letters, digits, '-' or '_'"
)


class WrongKey(ReflexrError):
    """The ciphertext does not open under the key of its id: it was altered, or the key differs
    (the codec reports it as errors.PayloadUnreadable)."""

    error_kind = Kind.FAILED


@dataclass(frozen=True)
class KeyRing:
    """Payload keys by id; ``primary`` is the one that encrypts."""

    primary: str
    keys: dict[str, bytes]

    @classmethod
    def parse(cls, spec: str) -> KeyRing | None:
        """The ring a ``REFLEXR_PAYLOAD_KEYS`` spec describes; None for ''; SettingsError saying what
        to fix (never echoing a key) for a bad one."""
        spec = spec.strip()
        if not spec:
            return None
        keys: dict[str, bytes] = {}
        for position, item in enumerate(spec.split(","), start=1):
            key_id, sep, encoded = item.strip().partition(":")
            if not sep or not _KEY_ID.match(key_id):
                raise SettingsError(f"{_SETTING}: entry {position} has no valid key id; {SPEC_HINT}")
            if key_id in keys:
                raise SettingsError(f"{_SETTING}: key id {key_id!r} appears twice; give each key its own id")
            try:
                key = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise SettingsError(f"{_SETTING}: key {key_id!r} is not valid base64; {SPEC_HINT}") from None
            if len(key) != KEY_BYTES:
                raise SettingsError(
                    f"{_SETTING}: key {key_id!r} is {len(key)} bytes, AES-256 needs {KEY_BYTES}; {SPEC_HINT}"
                )
            keys[key_id] = key
        return cls(next(iter(keys)), keys)

    def seal(self, data: bytes, aad: bytes) -> bytes:
        """``data`` encrypted under the primary key: a fresh nonce, then the ciphertext and its tag."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + AESGCM(self.keys[self.primary]).encrypt(nonce, data, aad)

    def open(self, key_id: str, sealed: bytes, aad: bytes) -> bytes:
        """The plaintext of ``sealed``; KeyError without ``key_id``, WrongKey when it does not open."""
        key = self.keys[key_id]
        try:
            return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except (InvalidTag, ValueError):
            raise WrongKey(key_id) from None
