"""`make run` / `reflexr-graph demo`: the whole showcase on an embedded Redis, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_survives_a_crash_dead_letters_and_replays(tmp_path: Path) -> None:
    """The demo kills a worker mid-step, dead-letters a poison run, replays it, and every run succeeds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLEXR_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "reflexr_graph", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    text = " ".join(out.split())
    assert "of the 8 step executions done before the crash, 0 ran again" in text
    assert "poison was dead-lettered after 3 attempts" in text
    assert "its plan step ran 1x" in text
    assert "every run succeeded" in text
    assert (tmp_path / ".run" / "redis" / "appendonlydir").is_dir(), (
        "the private Redis keeps its AOF in .run/"
    )
