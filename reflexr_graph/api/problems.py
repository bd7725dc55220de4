"""Errors as JSON problem details (RFC 9457), never with a traceback or a value the client sent.

Every error a route can meet maps here to a status: bad input 400 (a body that is not JSON) or
422 (a body or query that does not validate, inputs the graph's schema rejects), a missing run
or graph 404, a refused operation 409, a body too large 413, Redis unusable 503, and anything
unexpected 500 with a generic message (the server logs the traceback).
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

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"


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


def problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = Problem(status=status, title=title, detail=detail, **extra)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=MEDIA_TYPE, headers=headers
    )


def _locations(found: Sequence[Any]) -> list[ProblemError]:
    """Validation errors with only ``loc``, ``msg`` and ``type``: pydantic's also carry the input."""
    out = []
    for err in found:
        loc = [part if isinstance(part, int) else str(part) for part in err.get("loc", ())]
        out.append(
            ProblemError(loc=loc, msg=str(err.get("msg", "is invalid")), type=str(err.get("type", "")))
        )
    return out


def _where(found: list[ProblemError]) -> str:
    return "; ".join(".".join(str(p) for p in e.loc) + f": {e.msg}" for e in found)


async def _request_invalid(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    found = _locations(exc.errors())
    if any(e.type == "json_invalid" for e in found):
        # The body is not JSON at all: bad input, not a value that fails validation.
        bad = [ProblemError(loc=["body"], msg="is not valid JSON", type="json_invalid")]
        return problem(400, "Bad Request", "the request body is not valid JSON", errors=bad)
    return problem(
        422, "Unprocessable Content", f"the request does not validate: {_where(found)}", errors=found
    )


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else "the request failed"
    title = {401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large"}
    response = problem(exc.status_code, title.get(exc.status_code, "Error"), detail)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _reflexr(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.ReflexrError)
    if isinstance(exc, errors.InvalidInputs):
        found = _locations(exc.errors)
        return problem(422, "Unprocessable Content", str(exc), errors=found)
    if isinstance(exc, errors.UnknownSignal):
        bad = [
            ProblemError(
                loc=["body", "name"], msg="is not a signal the graph declares", type="unknown_signal"
            )
        ]
        return problem(422, "Unprocessable Content", str(exc), errors=bad)
    if isinstance(exc, errors.IdempotencyConflict):
        return problem(409, "Conflict", str(exc), run_id=exc.run_id)
    if isinstance(exc, errors.CheckpointNotFound):
        return problem(404, "Not Found", str(exc), kept=exc.kept)
    if isinstance(exc, errors.RunNotFound | errors.UnknownGraph):
        return problem(404, "Not Found", str(exc))
    if isinstance(exc, errors.OperationRefused):
        return problem(409, "Conflict", str(exc))
    if isinstance(exc, errors.StoreUnavailable):
        return problem(503, "Service Unavailable", str(exc))
    return await _unexpected(_request, exc)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the server's log only; the client learns that it failed, not how.
    log.error("%s %s failed with %s; answering 500", request.method, request.url.path, type(exc).__name__,
              exc_info=exc)  # fmt: skip
    return problem(500, "Internal Server Error", "the server failed to answer; its log says why")


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as a problem document."""
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(errors.ReflexrError, _reflexr)
    app.add_exception_handler(Exception, _unexpected)
