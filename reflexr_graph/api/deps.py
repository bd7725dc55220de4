"""What routes get from the app: its AsyncClient."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from reflexr_graph.client import AsyncClient


def _client(request: Request) -> AsyncClient:
    client = request.app.state.client
    assert isinstance(client, AsyncClient)
    return client


ClientDep = Annotated[AsyncClient, Depends(_client)]

TagQuery = Annotated[list[str] | None, Query(description="key=value; repeat for more (all must match)")]
