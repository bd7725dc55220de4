"""Routes for operations built in parallel with the API: signals (issue 10) and time travel (issue 11).

This is the place for them. When ``Client.signal`` lands, add here::

    POST /api/runs/{run_id}/signal      body {"name": str, "value": JSON} -> RunInfo (409 if not waiting)

and when fork and checkpoint history land::

    GET  /api/runs/{run_id}/checkpoints         -> list of checkpoints
    GET  /api/runs/{run_id}/checkpoints/{seq}   -> one checkpoint
    POST /api/runs/{run_id}/fork        body {"from_seq": int, "state"?: JSON, "idempotency_key"?: str}
                                        -> 201 RunInfo of the new run

each calling the AsyncClient method of the same name, with errors left to the problem handlers
(``api/problems.py``). The console's run page already has a place for the signal form and the
checkpoints (``static/console.js``: ``renderSignalForm`` and ``renderCheckpoints``).
"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/runs", tags=["runs"])
