"""Errors as JSON problem details (RFC 9457), never with a traceback or a value the client sent.

A reflexr-graph error is answered by its kind (:data:`HTTP_STATUS`): not found 404, invalid 422,
conflict 409, unavailable 503 (with ``Retry-After``), timeout 504, failed 500. The request's own
errors: a body that is not JSON 400 (415 when its Content-Type says it is not), one that does not
validate 422, a body too large 413. Anything unexpected is a 500 with a generic message (the
server logs the traceback).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from reflexr_graph import errors
from reflexr_graph.core import invalid
from reflexr_graph.errors import Kind

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"

HTTP_STATUS: dict[Kind, int] = {
    Kind.NOT_FOUND: 404,
    Kind.INVALID: 422,
    Kind.CONFLICT: 409,
    Kind.UNAVAILABLE: 503,
    Kind.TIMEOUT: 504,
    Kind.FAILED: 500,
}
"""The status that answers each kind of error (a 500 with a generic detail)."""
TITLES: dict[int, str] = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
"""The title of each status the API answers with, whoever chose the status: an error's kind, a
guard or Starlette refusing the request, or a request that does not validate; "Error" for another."""
RETRY_AFTER_S = 5
"""The ``Retry-After`` of a 503: Redis unreachable, loading, failing over or full passes on its own
or once an operator acts; a client asking again sooner only adds load."""


class ProblemError(BaseModel):
    """One failing location: where (``loc``), why (``msg``) and a stable ``type``; never the value."""

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[ProblemError] | None = None
    run_id: str | None = None
    kept: list[int] | None = Field(None, description="For a checkpoint not kept: the seqs the run keeps")


Responses = dict[int | str, dict[str, Any]]
"""A route's ``responses=``: what OpenAPI documents for each status besides the success."""


def problems(described: dict[int, str]) -> Responses:
    """The ``responses=`` of a route's statuses answered with a problem document, each described
    as it means there."""
    return {status: {"model": Problem, "description": text} for status, text in described.items()}


def problem(status: int, detail: str, **extra: Any) -> JSONResponse:
    body = Problem(status=status, title=TITLES.get(status, "Error"), detail=detail, **extra)
    headers = {401: {"WWW-Authenticate": "Bearer"}, 503: {"Retry-After": str(RETRY_AFTER_S)}}.get(status)
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=MEDIA_TYPE, headers=headers
    )


def _locations(found: Sequence[Any]) -> list[ProblemError]:
    """Validation errors with only ``loc``, ``msg`` and ``type``: pydantic's also carry the input."""
    return [ProblemError.model_validate(field) for field in invalid.fields(found)]


async def _request_invalid(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    found = _locations(exc.errors())
    if any(e.type == "json_invalid" for e in found):
        # The body is not JSON at all: bad input, not a value that fails validation.
        bad = [ProblemError(loc=["body"], msg="is not valid JSON", type="json_invalid")]
        return problem(400, "the request body is not valid JSON", errors=bad)
    return problem(
        422,
        f"the request does not validate: {invalid.describe(exc.errors())}",
        errors=found,
    )


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else "the request failed"
    response = problem(exc.status_code, detail)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _reflexr(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.ReflexrError)
    status = HTTP_STATUS[exc.error_kind]
    if status == 500:
        return await _unexpected(request, exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, errors.InvalidInputs):
        extra["errors"] = _locations(exc.errors)
    elif isinstance(exc, errors.UnknownSignal):
        msg = "is not a signal the graph declares"
        extra["errors"] = [ProblemError(loc=["body", "name"], msg=msg, type="unknown_signal")]
    elif isinstance(exc, errors.IdempotencyConflict):
        extra["run_id"] = exc.run_id
    elif isinstance(exc, errors.CheckpointNotFound):
        extra["kept"] = exc.kept
    return problem(status, str(exc), **extra)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the server's log only; the client learns that it failed, not how.
    log.error("%s %s failed with %s; answering 500", request.method, request.url.path, type(exc).__name__,
              exc_info=exc)  # fmt: skip
    return problem(500, "the server failed to answer; its log says why")


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as a problem document."""
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(errors.ReflexrError, _reflexr)
    app.add_exception_handler(Exception, _unexpected)
