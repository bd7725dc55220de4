"""The deployable worker app: ``REMAP_SIGTERM=SIGQUIT celery -A workers worker``.

It runs the graphs named in ``REFLEXR_GRAPHS``, and only those: the examples in
``workers/examples`` load when named there too (``workers.examples.triage:triage``), so a
production worker never publishes them and they never take a name from a user's graph.
Every other setting comes from ``REFLEXR_*`` variables too.
"""

from reflexr_graph.fleet.worker import build_app

app = build_app()
