"""``GET /api/audit``: the fleet's audit trail, newest first (store/audit.py). What was purged or
cancelled, and by whom, is operators' business: the route needs an operator (api/roles.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from reflexr_graph.api.deps import ClientDep
from reflexr_graph.store.audit import MAX_ENTRIES

router = APIRouter(prefix="/audit", tags=["audit"])


class AuditEntryOut(BaseModel):
    """One destructive action: ``run_id`` '' for one on no run (a quarantine purge), ``by`` ''
    when the caller gave no name, ``at_ms`` epoch ms."""

    action: str
    run_id: str
    by: str
    at_ms: int


@router.get("", response_model=list[AuditEntryOut])
async def audit_trail(
    client: ClientDep, limit: Annotated[int, Query(ge=1, le=MAX_ENTRIES)] = 100
) -> list[AuditEntryOut]:
    """The newest ``limit`` purges, cancels and quarantine purges, newest first."""
    return [AuditEntryOut.model_validate(e.to_json()) for e in await client.audit(limit)]
