"""``python -m bench.reader_path``: the path a reader follows from the Celery task to the Lua save
stays short (the house issue's bound: 15 modules at most), and the tool says what it found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MOST = 15


@pytest.mark.timeout(90)
def test_the_path_from_the_task_to_the_lua_save_opens_at_most_fifteen_modules() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.reader_path"], cwd=ROOT, capture_output=True, text=True, timeout=80
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("path: "))
    path = [line.strip() for line in lines[1:summary]]
    assert path[0] == "fleet/task.py" and path[-1] == "store/lua/save_checkpoint.lua", path
    assert lines[summary].startswith(f"path: {len(path)} modules"), lines[summary]
    assert len(path) <= MOST, path
