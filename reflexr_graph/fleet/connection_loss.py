"""Celery's notice at each lost broker connection, silenced: the fleet chose the setting it names.

With ``worker_cancel_long_running_tasks_on_connection_loss=False`` (config/celery.py says why),
Celery 5 warns at every lost connection that the default turns True in 6.0: a paragraph in the
worker's output at each Redis restart or blip, on a choice that is made. Celery's logging setup
turns every pending-deprecation warning to "always" as the worker starts, so the filter goes in
after it (``celeryd_after_setup``), and in front of it. Only this one notice is filtered.
"""

from __future__ import annotations

import warnings
from typing import Any

from celery import signals
from celery.exceptions import CPendingDeprecationWarning

NOTICE = r"\s*In Celery 5\.1 we introduced an optional breaking change"
"""How the notice starts (celery/worker/consumer/consumer.py: CANCEL_TASKS_BY_DEFAULT)."""


def silence() -> None:
    warnings.filterwarnings("ignore", message=NOTICE, category=CPendingDeprecationWarning)


def _after_setup(**_: Any) -> None:
    silence()


def install() -> None:
    signals.celeryd_after_setup.connect(_after_setup, weak=False)
