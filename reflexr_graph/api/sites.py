"""What keeps other sites out of the API: the Host a request names, and where a state-changing
request comes from.

A page on another site can make the user's browser send requests here. It cannot read the
answers unless its own name resolves to this address (DNS rebinding), which a Host this server
does not answer to refuses (400). It can still send a form or a no-cors fetch that changes
something, which an ``Origin`` of another site, or ``Sec-Fetch-Site`` saying so, refuses (403);
and a state-changing request must be declared JSON (``security.require_json``), which no form
and no no-cors fetch can declare. Clients that are not browsers send neither header.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reflexr_graph.api.middleware import HttpMiddleware
from reflexr_graph.api.problems import problem
from reflexr_graph.api.security import STATE_CHANGING, is_loopback

WILDCARDS = frozenset({"0.0.0.0", "::", ""})
"""Bound addresses that listen on every address of the machine."""
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request from the console itself, or one the user typed."""


def _split(authority: str) -> tuple[str, int | None] | None:
    """``host`` (lowercase, no brackets) and port of a Host value, or None when it is malformed."""
    if any(c in authority for c in "@/?#\\"):
        return None  # a Host is a name and a port, never user info or a path
    try:
        parts = urlsplit(f"//{authority}")
        return (parts.hostname or "", parts.port) if parts.hostname else None
    except ValueError:
        return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class HostRules:
    """The Host values the server answers: its bound address (``bound``; when it is loopback, any
    loopback name on its port; when it is every address, any IP on its port) and ``names``
    (REFLEXR_API_HOSTS: ``name``, any port, or ``name:port``). With no bound address (an app
    made in process), loopback names on any port."""

    bound: tuple[str, int] | None
    names: tuple[str, ...] = ()

    def allows(self, value: str) -> bool:
        split = _split(value)
        if split is None:
            return False
        host, port = split
        if value.lower() in self.names or host in self.names:
            return True
        if self.bound is None:
            return is_loopback(host)
        bound_host, bound_port = self.bound
        bound_host = bound_host.strip("[]").lower()
        if (port or 80) != bound_port:
            return False
        if is_loopback(bound_host) and is_loopback(host):
            return True
        return host == bound_host or (bound_host in WILDCARDS and _is_ip(host))


def cross_site(headers: Headers) -> str | None:
    """Why a state-changing request comes from another site, or None when it does not say so."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in SAME_SITE_FETCHES:
        return "the browser says it comes from another origin (Sec-Fetch-Site)"
    origin = headers.get("origin")
    if origin is None:
        return None
    parts = urlsplit(origin)
    if parts.scheme in ("http", "https") and parts.netloc.lower() == headers.get("host", "").lower():
        return None
    return "its Origin is not this server's"


class SiteGuard(HttpMiddleware):
    """Refuses a request whose Host the server does not answer to (400), and a state-changing
    one from another site (403), before anything else reads it."""

    def __init__(self, app: ASGIApp, rules: HostRules) -> None:
        super().__init__(app)
        self.rules = rules

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        if not self.rules.allows(headers.get("host", "")):
            detail = (
                "this server does not answer to the Host this request names: reach it by the address "
                "it listens on, or add the name to REFLEXR_API_HOSTS"
            )
            await problem(400, detail)(scope, receive, send)
            return
        why = cross_site(headers) if scope["method"] in STATE_CHANGING else None
        if why is not None:
            detail = (
                f"a request that changes something is refused from another site: {why}; the API takes "
                "them from its own console and from clients that send no Origin"
            )
            await problem(403, detail)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class RelativeRedirects(HttpMiddleware):
    """Makes the Location of every redirect relative (the trailing-slash redirect of
    ``/api/runs/`` is built from the Host header): the app never sends anyone to another site."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def relative(message: Message) -> None:
            if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
                message["headers"] = [
                    (name, _relative(value) if name.lower() == b"location" else value)
                    for name, value in message.get("headers", [])
                ]
            await send(message)

        await self.app(scope, receive, relative)


def _relative(location: bytes) -> bytes:
    parts = urlsplit(location.decode("latin-1"))
    path = parts.path if parts.path.startswith("/") else f"/{parts.path}"
    # "//host/..." would be read as another host: a path starts with exactly one slash.
    path = "/" + path.lstrip("/")
    return (path + (f"?{parts.query}" if parts.query else "")).encode("latin-1")
