"""`make run` / `reflexr-graph demo`: the whole showcase on an embedded Redis, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_server import RedisFactory

ROOT = Path(__file__).resolve().parents[1]


def _demo(cwd: Path, **extra_env: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLEXR_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra_env)
    done = subprocess.run(
        [sys.executable, "-m", "reflexr_graph", "demo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return " ".join(out.split())


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_survives_a_crash_dead_letters_and_replays(tmp_path: Path) -> None:
    """The demo kills a worker mid-step, dead-letters a poison run, replays it, and every run succeeds."""
    text = _demo(tmp_path)
    assert "of the 8 step executions done before the crash, 0 ran again" in text
    assert "poison was dead-lettered after 3 attempts" in text
    assert "its plan step ran 1x" in text
    assert "every run succeeded" in text
    assert (tmp_path / ".run" / "redis" / "appendonlydir").is_dir(), (
        "the private Redis keeps its AOF in .run/"
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_uses_the_redis_that_reflexr_redis_url_names(
    tmp_path: Path, private_redis: RedisFactory
) -> None:
    """With REFLEXR_REDIS_URL set, the demo runs on that Redis and starts no private one."""
    server = private_redis()
    text = _demo(tmp_path, REFLEXR_REDIS_URL=server.url)
    assert "every run succeeded" in text and f"127.0.0.1:{server.port}" in text
    assert not (tmp_path / ".run" / "redis").exists()
    assert server.client().zcard("rg:all") == 8, "the runs were recorded in the given Redis"
