"""What routes get from the app: its AsyncClient, and who is calling (``CallerDep``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from reflexr_graph.api.tokens import Caller, Role
from reflexr_graph.client import AsyncClient


def _client(request: Request) -> AsyncClient:
    client = request.app.state.client
    assert isinstance(client, AsyncClient)
    return client


ClientDep = Annotated[AsyncClient, Depends(_client)]

TagQuery = Annotated[list[str] | None, Query(description="key=value; repeat for more (all must match)")]


IN_PROCESS = Caller("api", Role.ADMIN)
"""The caller of an app made in process without tokens, which checks none."""


def _caller(request: Request) -> Caller:
    caller = getattr(request.state, "caller", None)
    return caller if isinstance(caller, Caller) else IN_PROCESS


CallerDep = Annotated[Caller, Depends(_caller)]
"""Who sent the request (security.require_token): ``.name`` is recorded as ``by`` on what it does,
``.role`` is what it may do (api/roles.py checked it before the route ran)."""
