"""What each ``/api`` route needs of a token's role: one table, checked before every route runs.

A read (GET, HEAD) needs a ``viewer``, unless :data:`NEEDS` names it (the audit trail: who did
what is operators' business). Every other method needs the role :data:`NEEDS` gives its route; a
route missing from it needs an ``admin``, so a route added without an entry is closed rather than
open (``tests/surfaces/test_api_tokens.py`` checks that every one has an entry).
"""

from __future__ import annotations

from fastapi import Request
from starlette.exceptions import HTTPException

from reflexr_graph.api.tokens import Caller, Role

API_PREFIX = "/api"
READS = frozenset({"GET", "HEAD", "OPTIONS"})

NEEDS: dict[str, Role] = {
    # Acting on runs: an operator.
    "POST /runs": Role.OPERATOR,
    "POST /runs/cancel": Role.OPERATOR,
    "POST /runs/{run_id}/cancel": Role.OPERATOR,
    "POST /runs/{run_id}/replay": Role.OPERATOR,
    "POST /runs/{run_id}/signal": Role.OPERATOR,
    "POST /runs/{run_id}/fork": Role.OPERATOR,
    "POST /dead-letters/replay": Role.OPERATOR,
    # Answering a run's external event (an approval): an operator.
    "POST /events/{token}": Role.OPERATOR,
    "POST /schedules": Role.OPERATOR,
    "POST /schedules/{name}/pause": Role.OPERATOR,
    "POST /schedules/{name}/resume": Role.OPERATOR,
    "POST /schedules/{name}/trigger": Role.OPERATOR,
    # Who purged or cancelled what: an operator reads it.
    "GET /audit": Role.OPERATOR,
    # What cannot be undone: an admin.
    "POST /runs/purge": Role.ADMIN,
    "DELETE /schedules/{name}": Role.ADMIN,
}
"""``"METHOD /path"`` (the route's path under ``/api``, as declared) -> the least role it needs."""


def operation(method: str, path: str) -> str:
    """The key of :data:`NEEDS` for a route: its method and its path under ``/api``."""
    if path.startswith(API_PREFIX + "/"):
        path = path[len(API_PREFIX) :]
    return f"{method} {path}"


def needed(method: str, path: str) -> Role:
    """The least role a request to the route ``path`` (as declared) with ``method`` needs."""
    if method in READS:
        return NEEDS.get(operation("GET" if method == "HEAD" else method, path), Role.VIEWER)
    return NEEDS.get(operation(method, path), Role.ADMIN)


def require_role(request: Request) -> None:
    """403 naming the role needed, for a caller whose role is below what the route needs.

    Runs after ``require_token``, which sets ``request.state.caller``; an app made in process
    without a token has no caller and checks nothing.
    """
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:
        return
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    need = needed(request.method, path)
    if caller.role < need:
        raise HTTPException(
            403,
            f"the token {caller.name!r} has the role {caller.role.label}; {request.method} {path} "
            f"needs the role {need.label} (or above): ask for a token with that role",
        )
