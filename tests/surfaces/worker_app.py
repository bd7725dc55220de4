"""The Celery app surface tests run workers of: ``celery -A tests.surfaces.worker_app worker``."""

from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet.factory import create_app
from tests.surfaces.graphs import WORKER_ACTIONS

app = create_app(load_settings(), {a.name: a for a in WORKER_ACTIONS})
