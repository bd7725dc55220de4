"""`reflexr-graph health`: the probe for a worker, against a real worker and a real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph import errors
from reflexr_graph.store import server_version
from reflexr_graph.store.ops import drive
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


def test_readiness_names_the_redis_version_and_the_minimum(redis_url: str, health: Health) -> None:
    """Issue 33: the scripts' flags need Redis 7.0; --redis says which version answered, and the minimum."""
    with redis.Redis.from_url(redis_url) as r:
        found = r.info("server")["redis_version"]
    result = health("--redis", REFLEXR_REDIS_URL=redis_url)
    assert result.returncode == 0, result.stderr
    assert f"Redis answers (version {found}; reflexr needs 7.0 or later)" in result.stdout


def test_a_redis_older_than_7_is_refused_naming_both_versions() -> None:
    """No Redis 6 is at hand: the check is driven with the INFO reply a 6.2 server gives (and a cluster's,
    one reply per node, its oldest node deciding)."""
    for reply in (
        {"redis_version": "6.2.14"},
        {"a:1": {"redis_version": "7.0.15"}, "b:2": {"redis_version": "6.2.14"}},
    ):
        with pytest.raises(errors.RedisMisconfigured) as refused:
            drive(server_version.check(), lambda _request, reply=reply: reply)
        assert refused.value.kind == "version"
        assert str(refused.value).startswith(
            "Redis 6.2.14 is older than 7.0, the oldest that runs reflexr's scripts"
        )
    assert drive(server_version.check(), lambda _request: {"redis_version": "7.2.4"}) == "7.2.4"
