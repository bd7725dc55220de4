"""`reflexr-graph health`: the probe for a worker, against a real worker and a real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fleet.conftest import Fleet
from tests.surfaces.cli_runner import run_cli
from tests.waiting import wait_for

Health = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def health(monkeypatch: pytest.MonkeyPatch) -> Health:
    """``reflexr-graph health ARGS...`` with only the ``REFLEXR_*`` settings given, run in this process
    as the console script runs it (tests/surfaces/cli_runner.py): the waits below call it often."""

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_cli(["health", *args], env, monkeypatch)

    return run


@pytest.mark.slow
def test_liveness_follows_the_worker_main_process(fleet: Fleet, tmp_path: Path, health: Health) -> None:
    """A running worker keeps its health file fresh (exit 0); once its main process is killed the
    file goes stale and the probe fails (exit 1), whether or not Redis is up."""
    alive = str(tmp_path / "worker.alive")
    worker = fleet.start(REFLEXR_HEALTH_FILE=alive)
    wait_for(lambda: health("--max-age", "5", REFLEXR_HEALTH_FILE=alive).returncode == 0, 30, "a fresh file")
    ready = health("--redis", REFLEXR_HEALTH_FILE=alive, REFLEXR_REDIS_URL=fleet.redis_url)
    assert ready.returncode == 0 and "Redis answers" in ready.stdout, ready.stderr
    os.killpg(worker.pid, signal.SIGKILL)
    stale = wait_for(
        lambda: (r := health("--max-age", "1.5", REFLEXR_HEALTH_FILE=alive)).returncode == 1 and r,
        30,
        "staleness",
    )
    assert "stuck or gone" in stale.stderr


def test_nothing_to_check_is_bad_usage(health: Health) -> None:
    """Without REFLEXR_HEALTH_FILE and without --redis there is nothing to probe: exit 2."""
    result = health()
    assert result.returncode == 2 and "REFLEXR_HEALTH_FILE" in result.stderr


def test_readiness_fails_when_redis_does_not_answer(tmp_path: Path, health: Health) -> None:
    """--redis makes the probe fail (exit 3, Redis unreachable) while Redis is unreachable, saying so."""
    result = health("--redis", REFLEXR_REDIS_URL="redis://127.0.0.1:1/0")
    assert result.returncode == 3 and "Redis does not answer" in result.stderr
