"""The payload store on S3 or an S3-compatible server (``REFLEXR_PAYLOAD_STORE=s3://bucket/prefix``).

Objects are named ``<prefix>/<first 2 hex>/<sha256>``, as files are in ``payload_store.py``.
boto3 (the ``s3`` extra) finds its endpoint, region and credentials the standard AWS way:
``AWS_ENDPOINT_URL`` for an S3-compatible server, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` or a role. A PUT that S3 acknowledged is durable, and it happens
before the script that refers to it, as for files. S3 being unreachable is reported as
errors.StoreUnavailable: the attempt is interrupted, not failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reflexr_graph import errors
from reflexr_graph.store.payload_digest import digest_of, sharded_name, verified

EXTRA_HINT = "pip install 'reflexr-graph[s3]'"


def _s3_client() -> Any:
    """boto3's S3 client, configured the standard AWS way."""
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise errors.ExtraNotInstalled(f"REFLEXR_PAYLOAD_STORE=s3:// needs boto3: {EXTRA_HINT}") from None
    return boto3.client("s3")


class S3PayloadStore:
    """Payload bytes as objects of one bucket, under a prefix."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._s3 = client if client is not None else _s3_client()

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, digest: str) -> str:
        name = sharded_name(digest)
        return f"{self.prefix}/{name}" if self.prefix else name

    def put(self, data: bytes) -> str:
        """Keep ``data`` and return its digest; writing the same bytes again renews their age."""
        digest = digest_of(data)
        self._call("put", self._s3.put_object, Bucket=self.bucket, Key=self.key(digest), Body=data)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes under ``digest``; FileNotFoundError when gone, ValueError when they do not match it."""
        found = self._call("get", self._s3.get_object, Bucket=self.bucket, Key=self.key(digest))
        if found is None:
            raise FileNotFoundError(digest)
        return verified(found["Body"].read(), digest)

    def entries(self) -> Iterator[tuple[str, float]]:
        """Every payload kept: (digest, last modified, epoch s)."""
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else ""
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"].rsplit("/", 1)[-1], item["LastModified"].timestamp()

    def delete_if_older(self, digest: str, cutoff: float) -> None:
        """Delete the object of ``digest`` unless it was written (again) after ``cutoff`` (epoch s)."""
        head = self._call("head", self._s3.head_object, Bucket=self.bucket, Key=self.key(digest))
        if head is not None and head["LastModified"].timestamp() <= cutoff:
            self._s3.delete_object(Bucket=self.bucket, Key=self.key(digest))

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """``fn(**kwargs)``; None for a missing object, StoreUnavailable when S3 cannot be reached."""
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        try:
            return fn(**kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise errors.StoreUnavailable(
                f"payload store {self.where}: {what} refused ({code}); check the bucket and the credentials",
                kind="payload_store",
            ) from None
        except BotoCoreError as exc:
            raise errors.StoreUnavailable(
                f"payload store {self.where}: {what} failed ({type(exc).__name__}); check AWS_ENDPOINT_URL "
                "and that S3 is reachable",
                kind="payload_store",
            ) from None
