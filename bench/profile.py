"""Where the durable path spends its time: pyinstrument over enqueue plus one attempt per run.

In process, without a broker round trip or a worker pool: ``Client.enqueue`` (validation,
run record, message) followed by ``task.handle`` (what the ``reflexr_graph.run`` task does
with the message: parse, claim, heartbeat thread, ``asyncio.run`` of the five steps with a
checkpoint each, record success), for the same ``five_steps`` graph. Celery's own message
handling in the worker is therefore not in this profile; the throughput table covers it.
pyinstrument samples the main thread only, so the heartbeat thread's renewals are not in it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench.fleet_graph import five_steps
from bench.procs import Lab
from reflexr_graph import schemas
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.fleet import task
from reflexr_graph.fleet.worker import build_app

QUEUE = "bench-profile"
TOP = 15
INTERVAL_S = 0.0002


def _walk(frame: Any, on_stack: frozenset[str], incl: dict[str, float], self_t: dict[str, float]) -> None:
    name = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
    if not frame.is_synthetic:
        self_t[name] += frame.total_self_time
        if name not in on_stack:  # a recursive frame counts once, at its outermost call
            incl[name] += frame.time
    for child in frame.children:
        _walk(child, on_stack | {name}, incl, self_t)


def _profiled(n: int, url: str) -> Any:
    from pyinstrument import Profiler  # optional: only `make bench` needs it

    settings = load_settings(redis_url=url, queue=QUEUE, graphs=("bench.fleet_graph:five_steps",))
    app = build_app(settings)
    with Client(settings) as client:
        schemas.publish(client.store, [five_steps])
        for i in range(3):  # warm up scripts, connections, imports
            task.handle(app, client.enqueue(five_steps.name, i), (), {"graph": five_steps.name, "inputs": i})
        profiler = Profiler(interval=INTERVAL_S)
        profiler.start()
        for i in range(n):
            run_id = client.enqueue(five_steps.name, i)
            task.handle(app, run_id, (), {"graph": five_steps.name, "inputs": i})
        session = profiler.stop()
        client.store.client.delete(QUEUE)
    app.store().close()
    return session


def run(lab: Lab, n: int = 300, progress: Callable[[str], None] = print) -> dict[str, Any]:
    session = _profiled(n, lab.url)
    incl: dict[str, float] = defaultdict(float)
    self_t: dict[str, float] = defaultdict(float)
    root = session.root_frame()
    _walk(root, frozenset(), incl, self_t)
    total = root.time
    progress(f"  {n} runs profiled, {total / n * 1e3:.2f} ms per run")
    top_incl = sorted(incl.items(), key=lambda kv: -kv[1])
    top_self = sorted(self_t.items(), key=lambda kv: -kv[1])[:TOP]
    return {"n": n, "total_s": total, "inclusive": top_incl[: TOP * 3], "self": top_self, "pid": os.getpid()}


def _ours(name: str) -> bool:
    # Inclusive rows worth showing: reflexr's own functions and the libraries it calls into.
    # asyncio's event-loop frames only wrap the steps, so they are left out.
    keep = ("reflexr_graph", "celery", "kombu", "redis", "pydantic_graph", "jsonschema", "asyncio/runners")
    return any(k in name for k in keep)


def render(result: dict[str, Any]) -> str:
    total, n = result["total_s"], result["n"]
    lines = [
        f"{n} runs, {total / n * 1e3:.2f} ms per run (enqueue + one attempt, in process). "
        "Inclusive time, largest first (reflexr and the libraries it calls):",
        "",
        "| function | ms/run | share |",
        "|---|---|---|",
    ]
    shown: list[tuple[str, float]] = []
    for k, v in result["inclusive"]:
        # A pass-through wrapper shows (nearly) its callee's time: keep the outer one only.
        if _ours(k) and not (shown and abs(shown[-1][1] - v) < 0.01 * total):
            shown.append((k, v))
    shown = shown[:TOP]
    lines += [f"| `{k}` | {v / n * 1e3:.3f} | {v / total:.0%} |" for k, v in shown]
    lines += ["", "Self time, largest first:", "", "| function | ms/run | share |", "|---|---|---|"]
    lines += [f"| `{k}` | {v / n * 1e3:.3f} | {v / total:.0%} |" for k, v in result["self"]]
    return "\n".join(lines)
