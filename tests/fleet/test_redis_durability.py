"""A Redis that will lose runs is said loudly: one WARNING at a worker's start, ``health --redis``
failing (unless ``--allow-volatile``), ``/readyz`` and the console's overview naming it.

Real redis-servers, each configured as an operator might leave one: evicting keys under memory
pressure (``maxmemory-policy allkeys-lru``), or persisting nothing (``appendonly no``, ``save ""``).
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from reflexr_graph.model import Durability
from reflexr_graph.store import durability
from reflexr_graph.store.durability import durability_warning, read_durability
from reflexr_graph.store.redis_store import RedisStore
from tests.fleet.conftest import Fleet
from tests.redis_server import RedisFactory
from tests.surfaces.cli_runner import run_cli

EVICTS = ("--maxmemory-policy", "allkeys-lru")
FORGETS = ("--appendonly", "no", "--save", "")
CASES = {
    "evicting": (EVICTS, "maxmemory-policy is allkeys-lru"),
    "not persisting": (FORGETS, 'persistence is off (appendonly no, save "")'),
}

Health = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def health(monkeypatch: pytest.MonkeyPatch) -> Health:
    def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(["health", "--redis", *args], {"REFLEXR_REDIS_URL": url}, monkeypatch)

    return run


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_redis_that_may_lose_runs_is_warned_about(
    case: str, private_redis: RedisFactory, tmp_path: Path, health: Health, request: pytest.FixtureRequest
) -> None:
    """The worker's log has one WARNING naming the setting and the fix; health --redis exits 1 with
    the same line, and 0 with --allow-volatile."""
    args, setting = CASES[case]
    server = private_redis(extra_args=args)
    fleet = Fleet(server.url, tmp_path, queue=f"durability-{uuid.uuid4().hex[:8]}")
    try:
        worker = fleet.start()
        lines = [line for line in worker.log().splitlines() if "Redis may lose runs" in line]
    finally:
        fleet.close()
    assert len(lines) == 1 and "WARNING" in lines[0], worker.log()[-3000:]
    assert setting in lines[0]
    fix = "set maxmemory-policy noeviction" if args is EVICTS else "set appendonly yes"
    assert lines[0].count(fix) == 1

    refused = health(server.url)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert setting in refused.stderr and fix in refused.stderr and "--allow-volatile" in refused.stderr
    allowed = health(server.url, "--allow-volatile")
    assert allowed.returncode == 0, allowed.stderr
    assert "Redis answers" in allowed.stdout and setting in allowed.stdout


def test_a_well_configured_redis_passes(private_redis: RedisFactory, health: Health) -> None:
    """The private Redis the demo, the benchmarks and the tests start (reflexr_graph/local_redis.py,
    appendonly yes and noeviction) passes its own check: health --redis says only that it answers,
    and which version."""
    server = private_redis()
    ok = health(server.url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.fullmatch(r"Redis answers \(version [0-9.]+; reflexr needs 7\.0 or later\)", ok.stdout.strip())
    store = RedisStore.from_url(server.url)
    try:
        found = store.do(read_durability())
    finally:
        store.close()
    assert found == Durability(checked=True, maxmemory_policy="noeviction", appendonly="yes", save="")


def test_a_redis_that_refuses_config_is_said_once_unchecked(
    private_redis: RedisFactory, health: Health
) -> None:
    """Managed Redis renames CONFIG away (or an ACL denies it): the check cannot be made, which is
    said, without failing the probe."""
    server = private_redis(extra_args=("--rename-command", "CONFIG", ""))
    ok = health(server.url)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count(durability.UNCHECKED) == 1
    acl = private_redis()
    r = redis.Redis.from_url(acl.url)
    try:
        r.acl_setuser("probe", enabled=True, passwords=["+pw"], commands=["+@all", "-config"], keys=["*"])
    finally:
        r.close()
    denied = health(acl.url.replace("redis://", "redis://probe:pw@"))
    assert denied.returncode == 0 and durability.UNCHECKED in denied.stdout, denied.stdout + denied.stderr


def test_the_verdict_names_both_settings_when_both_are_off() -> None:
    found = Durability(checked=True, maxmemory_policy="volatile-ttl", appendonly="no", save="")
    line = durability_warning(found)
    assert line is not None and line.count("Redis may lose runs") == 1
    assert "maxmemory-policy is volatile-ttl" in line and "appendonly no" in line
    assert (
        durability_warning(
            Durability(checked=True, maxmemory_policy="noeviction", appendonly="no", save="3600 1")
        )
        is None
    )
    assert durability_warning(Durability(checked=False)) is None
