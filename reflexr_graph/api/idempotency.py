"""The idempotency key of a creating request: the ``Idempotency-Key`` header or the body's field."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header

from reflexr_graph import errors

IdempotencyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=512)]


def one_key(header: str | None, body: str | None) -> str | None:
    """The key the request gives, by header or body; InvalidInputs (422) when both differ, since
    either could be the one the caller meant."""
    if header is not None and body is not None and header != body:
        raise errors.InvalidInputs(
            "the Idempotency-Key header and the body's idempotency_key differ; send one of them",
            [
                {
                    "loc": ["header", "Idempotency-Key"],
                    "msg": "differs from body.idempotency_key",
                    "type": "mismatch",
                }
            ],
        )
    return header or body
