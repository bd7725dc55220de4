"""What guards the API: the bearer token, JSON bodies only, security headers, the request body limit,
loopback-only binds.

``serve`` always has a token: the named ones of ``REFLEXR_API_TOKENS`` (``api/tokens.py``), and
``REFLEXR_API_TOKEN`` (at least :data:`TOKEN_MIN_LENGTH` characters), or one it generates at start
when neither is set. Every ``/api`` route needs ``Authorization: Bearer <token>``; the app holds
only the tokens' SHA-256 and compares digests in constant time. What each route needs of the
token's role is in ``api/roles.py``. An address that keeps
sending a wrong token is answered 429 for a while (:class:`AuthFailures`). The console sends the
token the way any API client does (it keeps it in the tab's session storage): there is no
cookie, so there is no session to forge. The Host and Origin checks are in ``api/sites.py``.
"""

from __future__ import annotations

import ipaddress
import json
import math
import time
from collections import OrderedDict
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reflexr_graph.api.middleware import HttpMiddleware
from reflexr_graph.api.tokens import TokenBook
from reflexr_graph.errors import Kind, ReflexrError, SettingsError

_bearer = HTTPBearer(auto_error=False, description="REFLEXR_API_TOKEN, or the token serve printed")

TOKEN_MIN_LENGTH = 32
"""The shortest token ``serve`` takes: a short one can be guessed, throttle or not."""
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

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


def check_token(token: str) -> None:
    """SettingsError for a configured token too short to resist guessing (never echoing it)."""
    if token and len(token) < TOKEN_MIN_LENGTH:
        raise SettingsError(
            f"REFLEXR_API_TOKEN is shorter than {TOKEN_MIN_LENGTH} characters, short enough to guess: set "
            "a long random one (python -c 'import secrets; print(secrets.token_urlsafe(32))'), or unset "
            "it and serve generates one"
        )


class AuthFailures:
    """Wrong tokens per client address: after ``limit`` in ``window_s`` seconds, every request from
    that address is answered 429 until the window ends, without a look at its token. Only a token
    that is sent and wrong counts (a console opened without one polls with none). In memory, for
    at most ``capacity`` addresses, the oldest forgotten first."""

    def __init__(self, limit: int = 10, window_s: float = 60.0, capacity: int = 10_000) -> None:
        self.limit = limit
        self.window_s = window_s
        self.capacity = capacity
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def retry_after(self, address: str) -> int:
        """Seconds ``address`` must wait before it is heard again; 0 when it may be heard now."""
        start, count = self._seen.get(address, (0.0, 0))
        left = start + self.window_s - time.monotonic()
        if left <= 0:
            self._seen.pop(address, None)
            return 0
        return math.ceil(left) if count >= self.limit else 0

    def failed(self, address: str) -> None:
        now = time.monotonic()
        start, count = self._seen.pop(address, (now, 0))
        if now - start >= self.window_s:
            start, count = now, 0
        self._seen[address] = (start, count + 1)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 unless the request carries one of the server's tokens (an app made in process may have
    none); 429 with Retry-After for an address that sent wrong tokens too often. Sets
    ``request.state.caller`` (:class:`~reflexr_graph.api.tokens.Caller`: the token's name and role),
    which ``api/deps.py`` gives routes as ``CallerDep``."""
    book: TokenBook | None = request.app.state.tokens
    if book is None:
        return
    failures: AuthFailures = request.app.state.auth_failures
    address = request.client.host if request.client else ""
    wait = failures.retry_after(address)
    if wait:
        raise HTTPException(
            429,
            "too many requests with a wrong bearer token from this address: try again later",
            headers={"Retry-After": str(wait)},
        )
    given = credentials.credentials if credentials is not None else ""
    caller = book.find(given) if given else None
    if caller is None:
        if given:
            failures.failed(address)
        why = "a bearer token is required" if not given else "the bearer token is not one of this server's"
        raise HTTPException(
            401,
            f"{why}: send Authorization: Bearer <a token of REFLEXR_API_TOKENS, REFLEXR_API_TOKEN, "
            "or the token serve printed>",
        )
    request.state.caller = caller
    request.state.token_holder = caller.name


def require_json(request: Request) -> None:
    """415 for a request not declared as JSON: a body of another type (a form, as ``curl -d``
    sends, or no Content-Type), and any request that changes something, body or not.

    A browser sends a cross-site form or no-cors fetch without a preflight only with a form or
    text type, never JSON: a body-less POST that passed would let any site cancel a run. And
    without this, FastAPI reads such a body as bytes, and its 422 never names the Content-Type.
    """
    if request.method not in STATE_CHANGING:
        length = request.headers.get("content-length")
        if length == "0" or (length is None and "transfer-encoding" not in request.headers):
            return
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise HTTPException(
        415,
        "the request must be sent as JSON, with Content-Type: application/json, even without a body "
        "(with curl, --json '{...}' rather than -d)",
        headers={"Accept-Post": "application/json"},
    )


class SecurityHeaders(HttpMiddleware):
    """Adds :data:`SECURITY_HEADERS` to every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self._headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
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


class BodyLimit(HttpMiddleware):
    """Refuses bodies over ``limit`` bytes: at once by Content-Length, else while they stream in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
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


def check_bind(host: str, token: str | bool) -> None:
    """Refuse to listen beyond loopback without a token: anyone who can reach the port could
    cancel, replay and enqueue runs."""
    if token or is_loopback(host):
        return
    raise SettingsError(
        f"refusing to listen on {host} without REFLEXR_API_TOKEN: any host that reaches the port could "
        "enqueue, cancel and replay runs; set REFLEXR_API_TOKEN to a long random secret, or serve on "
        "127.0.0.1 (the default) behind your own proxy"
    )
