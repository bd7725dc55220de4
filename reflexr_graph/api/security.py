"""What guards the API: the bearer token, JSON bodies only, security headers, the request body limit,
loopback-only binds.

With ``REFLEXR_API_TOKEN`` set, every ``/api`` route needs ``Authorization: Bearer <token>``,
compared in constant time. The console sends it the way any API client does (it keeps the
token in the tab's session storage): there is no cookie, so there is no session to forge.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reflexr_graph.errors import Kind, ReflexrError, SettingsError

_bearer = HTTPBearer(auto_error=False, description="REFLEXR_API_TOKEN, when the server has one")

SECURITY_HEADERS: dict[str, str] = {
    # Scripts and styles only from the app itself (no CDN, nothing inline): the console carries the
    # styles mermaid writes into its SVG over through the CSSOM (console.js, placeDiagram).
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    "Cache-Control": "no-store",
}


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries the server's token (when it has one)."""
    expected: str = request.app.state.api_token
    if not expected:
        return
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        why = "a bearer token is required" if not given else "the bearer token is not this server's"
        raise HTTPException(401, f"{why}: send Authorization: Bearer <REFLEXR_API_TOKEN>")


def require_json(request: Request) -> None:
    """415 for a body not declared as JSON (a form, as ``curl -d`` sends, or no Content-Type).

    Without this, FastAPI reads such a body as bytes, and the 422 it answers never names the
    Content-Type. A request without a body (``POST .../cancel``) needs none.
    """
    length = request.headers.get("content-length")
    if length == "0" or (length is None and "transfer-encoding" not in request.headers):
        return
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise HTTPException(
        415,
        "the request body must be JSON: send it with Content-Type: application/json "
        "(with curl, --json '{...}' rather than -d)",
        headers={"Accept-Post": "application/json"},
    )


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self._headers if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyTooLarge(HTTPException, ReflexrError):
    """The request body is larger than ``REFLEXR_API_MAX_BODY`` (413).

    An HTTPException first, the only kind FastAPI's body reading lets through to the handlers
    (which answer it by its own status, not by its kind).
    """

    error_kind = Kind.INVALID

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is larger than {limit} bytes (REFLEXR_API_MAX_BODY); send less, "
            "or pass a reference to large documents",
        )


class BodyLimit:
    """Refuses bodies over ``limit`` bytes: at once by Content-Length, else while they stream in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _refuse(send, BodyTooLarge(self.limit))
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                # An HTTPException, so FastAPI's body reading lets it through to the problem handler.
                raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Send, exc: BodyTooLarge) -> None:
    body = json.dumps(
        {"type": "about:blank", "title": "Content Too Large", "status": 413, "detail": exc.detail}
    ).encode()
    headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
    headers += [(b"connection", b"close")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str) -> None:
    """Refuse to listen beyond loopback without a token: anyone who can reach the port could
    cancel, replay and enqueue runs."""
    if token or is_loopback(host):
        return
    raise SettingsError(
        f"refusing to listen on {host} without REFLEXR_API_TOKEN: any host that reaches the port could "
        "enqueue, cancel and replay runs; set REFLEXR_API_TOKEN to a long random secret, or serve on "
        "127.0.0.1 (the default) behind your own proxy"
    )
