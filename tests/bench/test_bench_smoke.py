"""Smoke test of ``python -m bench --quick``: it runs end to end and writes every section.

The benchmarks run in three parts (``--only``), each a test of its own, so that xdist runs them side
by side; between them they run every benchmark (:func:`test_the_parts_run_every_benchmark`).
No timing assertion: the machines are shared and noisy; only the doc's shape is checked.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = {
    "checkpoint": ("## 1. Checkpoint cost per step", "| added / RTT in situ |"),
    "journal": ("## 1b. Recording finished work between checkpoints",),
    "throughput": (
        "## 2. Throughput",
        "durable / plain throughput:",
        "durable / chain throughput:",
        "## 3. Scaling",
        "durable throughput -c 2 / -c 1:",
    ),
    "redis": ("## 3b. Redis server cost per run", "runs/s one Redis core sustains", "hot-loop PINGs"),
    "idle": ("## 3c. An idle worker", "its own commands:"),
    "recovery": ("## 4. Recovery", "× the lease TTL"),
    "memory": ("## 5. Redis memory per run", "total / (inputs + state)"),
    "waits": (
        "## 5b. Waiting runs",
        "Redis memory per waiting run",
        "| per waiting run | signal wait | approval wait |",
        "approval (`Client.resolve_event`) to the approved tool running",
    ),
    "enqueue": ("## 6. Enqueue rate", "rate / Client.enqueue"),
    "profile": ("## 7. Profile of the durable path",),
    "history": ("## 8. Checkpoint history: Redis memory per checkpoint kept", "per kept / JSON"),
    "limits": ("## 9. Limits", "| Redis round trips per limited step |", "over configured"),
    "scale": ("## 10. The store at scale", "| wall large / small |"),
    "stream": ("## 11. Streaming", "| emit to a blocked reader, median |"),
    "payloads": ("## 12. Payloads at rest", "offloaded / as is Redis memory"),
    "cluster": (
        "## 13. Redis Cluster",
        "busiest primary's share of the commands with 3 primaries",
        "fanned-out / single-store `runs` wall",
    ),
}
"""Per benchmark (bench/__main__.py: NAMES), the headings and ratio lines its section writes."""
PARTS = {
    "local-and-cluster": (
        "checkpoint", "journal", "history", "limits", "payloads", "scale", "stream", "cluster",
    ),
    "fleet": ("throughput", "memory", "waits", "enqueue", "profile"),
    "server-cost-and-recovery": ("redis", "idle", "recovery"),
}  # fmt: skip
"""About 20 s each in quick mode (the whole bench is a minute)."""


def _bench_names() -> list[str]:
    """bench/__main__.py's NAMES, read from its source (the tests do not import bench)."""
    tree = ast.parse((ROOT / "bench" / "__main__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "NAMES" for t in node.targets):
            return [str(name) for name in ast.literal_eval(node.value)]
    raise AssertionError("bench/__main__.py has no NAMES")


def test_the_parts_run_every_benchmark() -> None:
    """Each benchmark is in exactly one part, and each has its section's lines checked."""
    in_parts = [name for part in PARTS.values() for name in part]
    assert sorted(in_parts) == sorted(_bench_names()) == sorted(SECTIONS)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("part", PARTS)
def test_quick_bench_writes_every_section(part: str, tmp_path: Path) -> None:
    """`make bench` end to end at tiny counts, one part at a time: every section and ratio line of
    the part's benchmarks is written, and none of another's."""
    out = tmp_path / "benchmarks.md"
    only = [arg for name in PARTS[part] for arg in ("--only", name)]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", *only, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = out.read_text()
    for name in PARTS[part]:
        for line in SECTIONS[name]:
            assert line in doc, (name, line)
    others = [lines[0] for name, lines in SECTIONS.items() if name not in PARTS[part]]
    assert not [heading for heading in others if heading in doc], "--only wrote another benchmark's section"
    assert "cores" in doc and "redis-server" in doc and "quick mode" in doc
