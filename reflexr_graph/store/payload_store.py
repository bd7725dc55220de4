"""The payload store (``REFLEXR_PAYLOAD_STORE=file:///dir``, or ``s3://``: payload_s3.py): large
payloads, content-addressed.

A payload over ``REFLEXR_OFFLOAD_BYTES`` is kept here as a file named for the SHA-256 of its
bytes (already compressed and encrypted by the codec), and Redis keeps only that digest. The
file is written, and synced, before the script that refers to it runs, so a crash leaves at
most an orphan file, never a reference to nothing. Orphans, and the files of runs that are gone,
are deleted by :func:`sweep` once they are older than the retention (the reaper runs it).

The directory may be a local disk or a shared volume (NFS, EFS) that every worker and client
mounts at the same path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from reflexr_graph.errors import SettingsError
from reflexr_graph.store.payload_digest import digest_of, sharded_name, verified
from reflexr_graph.store.payload_s3 import S3PayloadStore

SCHEME = "file"


S3_SCHEME = "s3"
_FORMS = "file:///absolute/dir (a local or shared volume) or s3://bucket/prefix"


def parse(url: str) -> Path | tuple[str, str]:
    """The directory of a ``file:///dir`` URL, or (bucket, prefix) of an ``s3://bucket/prefix`` one;
    SettingsError saying what to fix for any other."""
    parts = urlsplit(url)
    if parts.scheme == S3_SCHEME and parts.netloc:
        return parts.netloc, unquote(parts.path).strip("/")
    if parts.scheme != SCHEME or parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise SettingsError(f"REFLEXR_PAYLOAD_STORE must be {_FORMS} (got scheme {parts.scheme!r})")
    return Path(unquote(parts.path))


def open_store(url: str) -> FilePayloadStore | S3PayloadStore:
    """The payload store a ``REFLEXR_PAYLOAD_STORE`` URL names."""
    where = parse(url)
    if isinstance(where, Path):
        return FilePayloadStore(where)
    return S3PayloadStore(*where)


class FilePayloadStore:
    """Payload bytes in files ``<dir>/<first 2 hex>/<sha256>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def from_url(cls, url: str) -> FilePayloadStore:
        where = parse(url)
        if not isinstance(where, Path):
            raise SettingsError(f"{url.split('://')[0]}:// is not a directory; use file:///absolute/dir")
        return cls(where)

    @property
    def where(self) -> str:
        return f"file://{self.root}"

    def path(self, digest: str) -> Path:
        return self.root / sharded_name(digest)

    def put(self, data: bytes) -> str:
        """Keep ``data`` (synced to disk) and return its digest; the same bytes are kept once.

        Writing bytes kept already only renews their age, so a sweep does not delete what a new
        reference was just given.
        """
        digest = digest_of(data)
        target = self.path(digest)
        if target.exists():
            os.utime(target)
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _sync_dir(target.parent)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes under ``digest``; FileNotFoundError when gone, ValueError when they do not match it."""
        return verified(self.path(digest).read_bytes(), digest)

    def entries(self) -> Iterator[tuple[str, float]]:
        """Every payload kept: (digest, modification time in epoch s)."""
        if not self.root.is_dir():
            return
        for shard in self.root.iterdir():
            if not shard.is_dir():
                continue
            for item in shard.iterdir():
                if not item.name.startswith(".tmp-"):
                    yield item.name, item.stat().st_mtime

    def delete_if_older(self, digest: str, cutoff: float) -> None:
        """Delete the file of ``digest`` unless it was written (again) after ``cutoff`` (epoch s)."""
        path = self.path(digest)
        try:
            if path.stat().st_mtime <= cutoff:
                path.unlink(missing_ok=True)
        except FileNotFoundError:
            pass


def _sync_dir(path: Path) -> None:
    # The new name is durable only once its directory is: a crash could otherwise lose a file
    # that a reference in Redis already names.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
