"""The deployable worker app: ``REMAP_SIGTERM=SIGQUIT celery -A workers worker``.

It runs the graphs named in ``REFLEXR_GRAPHS`` and the examples in ``workers/examples``;
every other setting comes from ``REFLEXR_*`` variables too.
"""

from reflexr_graph.fleet.worker import build_app
from workers.examples import EXAMPLES

app = build_app(extra_actions=EXAMPLES)
