"""The HTTP API and the web console, served by one FastAPI app (``reflexr-graph serve``).

Routes live under ``/api`` (runs, dead letters, graphs), the console at ``/``, probes at
``/healthz`` and ``/readyz``, and the OpenAPI document at ``/openapi.json``. Everything runs on
the native :class:`~reflexr_graph.client.AsyncClient`, so a live event stream holds a Redis
connection while it waits, not a thread.
"""

from reflexr_graph.api.app import create_app

__all__ = ["create_app"]
