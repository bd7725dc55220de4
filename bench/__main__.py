"""``python -m bench``: run every benchmark and write docs/benchmarks.md.

``--quick`` uses tiny counts (for the smoke test; its figures mean nothing), ``--only NAME``
runs some benchmarks and writes only their sections. Every process started is stopped on
the way out, also on failure, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from bench import (
    checkpoint_cost,
    cluster_cost,
    enqueue,
    history_cost,
    idle_cost,
    journal_cost,
    limits,
    memory,
    payload_cost,
    profile,
    recovery,
    redis_cost,
    report,
    store_scale,
    stream_cost,
    throughput,
    waits,
)
from bench.procs import Lab, lab
from reflexr_graph.local_store import Mix

NAMES = (
    "checkpoint",
    "journal",
    "history",
    "throughput",
    "memory",
    "waits",
    "recovery",
    "enqueue",
    "profile",
    "limits",
    "scale",
    "redis",
    "idle",
    "stream",
    "payloads",
    "cluster",
)
LOCAL = ("checkpoint", "journal", "history", "limits", "scale", "stream", "payloads")
"""Benchmarks that need no fleet: they run against a private Redis in this process."""
FULL = {
    "ckpt_reps": 7, "journal_reps": 5, "hist_saves": 300, "runs": 200, "tp_reps": 3, "rec_reps": 5,
    "enq_n": 1000, "enq_reps": 3, "prof_n": 300, "wait_n": 1000, "wait_signals": 50, "wait_sleeps": 5,
    "wait_approvals": 50,
    "limit_n": 60, "limit_steps": 200, "limit_reps": 5, "scale_runs": 100_000, "cost_runs": 300,
    "stream_reps": 3,
    "payload_reps": 5,
    "cluster_runs": 64, "cluster_idle_ms": 500, "cluster_list_runs": 2000, "idle_s": 70,
    "cost_idle_ms": 3000,
}  # fmt: skip
QUICK = {
    "ckpt_reps": 1, "journal_reps": 1, "hist_saves": 10, "runs": 10, "tp_reps": 1, "rec_reps": 1,
    "enq_n": 50, "enq_reps": 1, "prof_n": 10, "wait_n": 10, "wait_signals": 3, "wait_sleeps": 1,
    "wait_approvals": 3,
    "limit_n": 10, "limit_steps": 20, "limit_reps": 1, "scale_runs": 2000, "cost_runs": 10,
    "stream_reps": 1,
    "payload_reps": 1,
    "cluster_runs": 5, "cluster_idle_ms": 200, "cluster_list_runs": 100, "idle_s": 1,
    "cost_idle_ms": 200,
}  # fmt: skip
TITLES = {
    "checkpoint": "1. Checkpoint cost per step",
    "journal": "1b. Recording finished work between checkpoints: branch results and durable calls",
    "throughput": "2. Throughput: durable vs plain Celery vs a Celery chain",
    "scaling": "3. Scaling: 1 vs 2 worker processes",
    "redis": "3b. Redis server cost per run, and the fleet's cost per step",
    "idle": "3c. An idle worker's own Redis commands",
    "recovery": "4. Recovery after SIGKILL of a worker mid-step",
    "memory": "5. Redis memory per run",
    "waits": (
        "5b. Waiting runs: memory per waiting run (a signal wait and an approval), and how soon a "
        "signal, a timer or an approval wakes one"
    ),
    "enqueue": "6. Enqueue rate",
    "profile": "7. Profile of the durable path",
    "history": "8. Checkpoint history: Redis memory per checkpoint kept",
    "limits": "9. Limits: round trips per limited step, and the accuracy of a rate",
    "scale": "10. The store at scale: the reaper and the CLI with many runs held, memory, retention",
    "stream": "11. Streaming: what emit costs a step, and how soon a blocked reader gets an item",
    "payloads": "12. Payloads at rest: compression, encryption and offload per save, and Redis memory",
    "cluster": "13. Redis Cluster: work per primary with 1 and 3 primaries, and a fanned-out listing",
}


def _say(msg: str) -> None:
    print(msg, flush=True)


def _fleet_phases(the_lab: Lab, only: set[str], p: dict[str, int]) -> dict[str, str]:
    out: dict[str, str] = {}
    phases: dict[str, Callable[[], None]] = {
        "throughput": lambda: _throughput(the_lab, p, out),
        "memory": lambda: out.update(memory=memory.render(memory.run(the_lab, _say))),
        "waits": lambda: out.update(
            waits=waits.render(
                waits.run(
                    the_lab, p["wait_n"], p["wait_signals"], p["wait_sleeps"], p["wait_approvals"], _say
                )
            )
        ),
        "redis": lambda: out.update(
            redis=redis_cost.render(
                redis_cost.run(the_lab, p["cost_runs"], p["tp_reps"], _say, p["cost_idle_ms"] / 1000)
            )
        ),
        "idle": lambda: out.update(idle=idle_cost.render(idle_cost.run(the_lab, p["idle_s"], _say))),
        "cluster": lambda: out.update(cluster=_cluster(the_lab, p)),
        "recovery": lambda: out.update(recovery=recovery.render(recovery.run(the_lab, p["rec_reps"], _say))),
        # Last: their runs are never consumed, so the reaper keeps re-sending them once their
        # dispatch grace passes, which would slow the reaper the recovery phase times.
        "enqueue": lambda: out.update(
            enqueue=enqueue.render(enqueue.run(the_lab, p["enq_n"], p["enq_reps"], _say))
        ),
        "profile": lambda: out.update(profile=profile.render(profile.run(the_lab, p["prof_n"], _say))),
    }
    for name, phase in phases.items():
        if name in only:
            _say(f"[{name}]")
            phase()
    return out


def _throughput(the_lab: Lab, p: dict[str, int], out: dict[str, str]) -> None:
    result = throughput.run(the_lab, p["runs"], p["tp_reps"], _say)
    out["throughput"] = throughput.render(result)
    out["scaling"] = throughput.render_scaling(result, os.cpu_count())


def _cluster(the_lab: Lab, p: dict[str, int]) -> str:
    n = p["cluster_list_runs"]
    mix = Mix(n, n // 10, n // 100)
    return cluster_cost.render(
        cluster_cost.run(the_lab, p["cluster_runs"], p["cluster_idle_ms"] / 1000, mix, _say)
    )


def _sigterm(signum: int, frame: FrameType | None) -> None:
    # Unwinds like Ctrl-C, so every `finally` stops the processes it started.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts, for the smoke test")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only this benchmark (repeatable)")
    parser.add_argument("--out", type=Path, default=report.DEFAULT_OUT, help="where to write the markdown")
    parser.add_argument(
        "--scale-runs",
        type=int,
        metavar="N",
        help="finished runs in the large store of `scale` (default 100,000)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    only, p = set(args.only or NAMES), QUICK if args.quick else FULL
    t0 = time.monotonic()
    sections: dict[str, str] = {}
    if "checkpoint" in only:
        _say("[checkpoint]")
        sections["checkpoint"] = checkpoint_cost.render(checkpoint_cost.run(p["ckpt_reps"]))
    if "journal" in only:
        _say("[journal]")
        sections["journal"] = journal_cost.render(journal_cost.run(p["journal_reps"]))
    if "history" in only:
        _say("[history]")
        sections["history"] = history_cost.render(history_cost.run(p["hist_saves"]))
    if "limits" in only:
        _say("[limits]")
        sections["limits"] = limits.render(limits.run(p["limit_steps"], p["limit_reps"], p["limit_n"]))
    if "payloads" in only:
        _say("[payloads]")
        sections["payloads"] = payload_cost.render(payload_cost.run(p["payload_reps"], quick=args.quick))
    if "scale" in only:
        _say("[scale]")
        sections["scale"] = store_scale.render(store_scale.run(args.scale_runs or p["scale_runs"], _say))
    if "stream" in only:
        _say("[stream]")
        sections["stream"] = stream_cost.render(stream_cost.run(p["stream_reps"]))
    if only - set(LOCAL):
        with lab() as the_lab:
            sections.update(_fleet_phases(the_lab, only, p))
    ordered = {TITLES[k]: sections[k] for k in TITLES if k in sections}
    wall = time.monotonic() - t0
    report.write(ordered, args.out, quick=args.quick, wall_s=wall)
    _say(f"wrote {args.out} in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; every process started was stopped", file=sys.stderr)
        sys.exit(130)
