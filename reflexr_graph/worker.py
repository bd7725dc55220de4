"""The Celery app a worker runs: ``celery -A reflexr_graph.worker worker`` (or ``reflexr-graph worker``).

It runs the graphs named in ``REFLEXR_GRAPHS``, and only those, imported with the worker's working
directory first on ``sys.path`` (``celery -A`` puts it there while it loads the app; ``reflexr-graph
worker`` does the same), so a project's own modules load from where its worker starts. Every other
setting comes from ``REFLEXR_*`` variables too. Importing this module builds the app.
"""

from reflexr_graph.fleet.worker import build_app

app = build_app()
celery = app
"""The same app under the name ``celery -A`` also looks for."""

__all__ = ["app", "celery"]
