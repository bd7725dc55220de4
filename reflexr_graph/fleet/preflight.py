"""A worker checks its Redis once at start, and stops when no retry could help.

Celery retries a broker connection forever (``broker_connection_max_retries=None``), which
is right for an outage but wrong for a URL that can never work: a database the server does
not have, a wrong password, TLS on one side only, not a Redis server. Such a worker would
log the same error every few seconds and never run anything. So at ``worker_init`` it pings
the store once: a misconfiguration stops it with exit status 1 and one line saying what to
fix; Redis merely down lets it start, to connect once Redis answers.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import signals

from reflexr_graph.errors import RedisMisconfigured, StoreUnavailable
from reflexr_graph.fleet.app import FleetApp

log = logging.getLogger(__name__)


def _check(sender: Any = None, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if not isinstance(app, FleetApp):
        return
    try:
        app.store().ping()
    except RedisMisconfigured as exc:
        log.critical("%s; the worker stops: fix REFLEXR_REDIS_URL (or the server), then start it again", exc)
        # SystemExit, not an exception: Celery's signal dispatch logs and swallows exceptions.
        sys.exit(1)
    except StoreUnavailable as exc:
        log.warning("%s; the worker starts anyway and connects once Redis answers", exc)


def install() -> None:
    signals.worker_init.connect(_check, weak=False)
