"""Enqueue rate from one client, with and without schema validation.

No worker consumes the queue: this times the producer alone, on one connection each to the
store and the broker. Three paths, interleaved in each repetition:

* ``Client.enqueue``: HGET of the published schema, parse it, JSON Schema validation of the
  inputs, ``create_run`` (one Lua script, which also pushes the Celery message: the broker is
  the store's Redis).
* ``create_run + send_run``: the record, then the message through kombu, as with a broker that
  is not the store's; no schema read or validation.
* ``send_run`` only: the Celery message alone, what a plain Celery ``send_task`` costs.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.fleet_graph import five_steps
from bench.procs import Lab
from reflexr_graph import schemas
from reflexr_graph.client import DISPATCH_GRACE_MS, Client
from reflexr_graph.config.dispatch import send_run
from reflexr_graph.config.settings import load_settings

QUEUE = "bench-enqueue"
GRAPH = five_steps.name


def _timed(n: int, one: Callable[[int], object]) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        one(i)
    return n / (time.perf_counter() - t0)


def _paths(client: Client) -> dict[str, Callable[[int], object]]:
    store, max_attempts = client.store, client.settings.max_attempts

    def unvalidated(i: int) -> None:
        run_id = str(uuid.uuid4())
        inputs_json = json.dumps(i, allow_nan=False, separators=(",", ":"))
        store.create_run(
            run_id, graph=GRAPH, inputs_json=inputs_json, max_attempts=max_attempts,
            dispatch_grace_ms=DISPATCH_GRACE_MS,
        )  # fmt: skip
        send_run(client.app, run_id, GRAPH)

    return {
        "Client.enqueue": lambda i: client.enqueue(GRAPH, i),
        "create_run + send_run": unvalidated,
        "send_run only": lambda i: send_run(client.app, str(uuid.uuid4()), GRAPH),
    }


def run(lab: Lab, n: int = 1000, reps: int = 3, progress: Callable[[str], None] = print) -> dict[str, Any]:
    with Client(load_settings(redis_url=lab.url, queue=QUEUE)) as client:
        schemas.publish(client.store, [five_steps])  # what a worker does at startup
        paths = _paths(client)
        for one in paths.values():
            _timed(max(10, n // 10), one)  # warm up: connections, Lua script load, producer
        rates: dict[str, list[float]] = {name: [] for name in paths}
        for rep in range(reps):
            for name, one in paths.items():
                rates[name].append(_timed(n, one))
            progress(f"  rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in rates.items()))
        client.store.client.delete(QUEUE)  # the unconsumed messages
    return {"n": n, "reps": reps, "rates": rates}


def render(result: dict[str, Any]) -> str:
    rates = result["rates"]
    base = rates["Client.enqueue"]
    lines = [
        f"{result['n']} enqueues per path per repetition, {result['reps']} repetitions interleaved; "
        "median [min-max].",
        "",
        "| path | what it includes | enqueues/s | rate / Client.enqueue |",
        "|---|---|---|---|",
    ]
    what = {
        "Client.enqueue": (
            "published schema (re-read every 2 s) + JSON Schema validation (compiled once per "
            "fingerprint) + create_run, which pushes the message in the same script"
        ),
        "create_run + send_run": "run record (Lua), then the message (kombu); no schema read or validation",
        "send_run only": "the Celery message alone (no run record)",
    }
    for name, values in rates.items():
        rel = [v / b for v, b in zip(values, base, strict=True)]
        rate = f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"
        relative = f"{statistics.median(rel):.2f} [{min(rel):.2f}-{max(rel):.2f}]"
        lines.append(f"| {name} | {what[name]} | {rate} | {relative} |")
    return "\n".join(lines)
