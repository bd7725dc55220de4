"""Stopping a worker with SIGTERM, started either way (``celery -A workers worker`` or
``reflexr-graph worker``) and without REMAP_SIGTERM in its environment: idle, it exits at once."""

from __future__ import annotations

import signal
import time

import pytest

from tests.fleet.conftest import ENTRY_POINTS, Fleet

ENTRIES = sorted(ENTRY_POINTS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", ENTRIES)
def test_an_idle_worker_exits_promptly_on_sigterm(fleet: Fleet, entry: str) -> None:
    """With nothing running there is nothing to wait for: the worker exits well before a 30 s
    soft-shutdown timeout would have passed."""
    worker = fleet.start(entry=entry, remap=False, REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S="30")
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.wait_exit(15)
    print(f"\n{entry}: idle worker exited {time.monotonic() - started:.2f}s after SIGTERM (status {code})")
    assert "Initiating Soft Shutdown" not in worker.log()
