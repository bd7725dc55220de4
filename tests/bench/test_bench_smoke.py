"""Smoke test of ``python -m bench --quick``: it runs end to end and writes every section.

No timing assertion: the machines are shared and noisy; only the doc's shape is checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "## 1. Checkpoint cost per step",
    "## 1b. Recording finished work between checkpoints",
    "## 2. Throughput",
    "## 3. Scaling",
    "## 3b. Redis server cost per run",
    "## 3c. An idle worker",
    "## 4. Recovery",
    "## 5. Redis memory per run",
    "## 5b. Waiting runs",
    "## 6. Enqueue rate",
    "## 7. Profile of the durable path",
    "## 8. Checkpoint history: Redis memory per checkpoint kept",
    "## 9. Limits",
    "## 10. The store at scale",
    "## 11. Streaming",
    "## 12. Payloads at rest",
    "## 13. Redis Cluster",
)
RATIO_LINES = (
    "durable / plain throughput:",
    "durable / chain throughput:",
    "durable throughput -c 2 / -c 1:",
    "× the lease TTL",
    "| added / RTT in situ |",
    "rate / Client.enqueue",
    "total / (inputs + state)",
    "Redis memory per waiting run",
    "per kept / JSON",
    "| Redis round trips per limited step |",
    "over configured",
    "| wall large / small |",
    "runs/s one Redis core sustains",
    "hot-loop PINGs",
    "| emit to a blocked reader, median |",
    "offloaded / as is Redis memory",
    "busiest primary's share of the commands with 3 primaries",
    "fanned-out / single-store `runs` wall",
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_quick_bench_writes_every_section(tmp_path: Path) -> None:
    """`make bench` end to end at tiny counts: every section and ratio line is written."""
    out = tmp_path / "benchmarks.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = out.read_text()
    for heading in SECTIONS:
        assert heading in doc
    for line in RATIO_LINES:
        assert line in doc
    assert "cores" in doc and "redis-server" in doc and "quick mode" in doc
