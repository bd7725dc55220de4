"""Names in the payload stores (files, payload_store.py; objects, payload_s3.py): content-addressed
by the SHA-256 of the bytes, under ``<first 2 hex>/<sha256>`` so no one folder holds them all."""

from __future__ import annotations

import hashlib

_HEX = frozenset("0123456789abcdef")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sharded_name(digest: str) -> str:
    """``<first 2 hex>/<digest>``; ValueError for anything but a SHA-256 hex digest (a reference read
    from Redis never names a path outside the store)."""
    if len(digest) != 64 or any(c not in _HEX for c in digest):
        raise ValueError("not a SHA-256 digest")
    return f"{digest[:2]}/{digest}"


def verified(data: bytes, digest: str) -> bytes:
    """``data``, once it matches ``digest``; ValueError when it does not."""
    if digest_of(data) != digest:
        raise ValueError(f"payload {digest} does not match its digest")
    return data
