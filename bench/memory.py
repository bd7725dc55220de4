"""Redis memory of one run: mid-flight with a checkpoint, and finished.

The ``hold`` graph records its payload into the state (checkpointed), then waits for a gate.
While it waits, the benchmark sums ``MEMORY USAGE`` over the run's keys (``run_keys``: run
hash, long inputs, checkpoints, events, traceback); it opens the gate, waits for the run to finish and sums
again (the first checkpoint is then history: measured apart, on copies of the keys). Both
are set against the byte size of the run's inputs and state JSON. The global indexes (status
sets, ``rg:all``) hold a few dozen bytes per run and are not counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import redis

from bench import fleet_graph
from bench.procs import Lab, wait_for
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.store import keys
from reflexr_graph.store.records import LATEST_CHECKPOINT, checkpoint_field

QUEUE = "bench-memory"
PAYLOAD_BYTES = 1000
LIVE_OVER_B = 2048
"""Target: a live run holds at most its inputs and state plus this."""
FINISHED_OVER_B = 1536
"""Target: a finished run holds at most its output and its inputs (kept for a replay) plus this, as
issue 18 states it (output + inputs + 2,565 B then)."""


def _usage(client: Client, run_id: str) -> dict[str, int]:
    r = client.store.client
    # SAMPLES 0: count every element of the hash and stream, not an estimate from a sample.
    sizes = {key: r.memory_usage(key, samples=0) for key in keys.run_keys(run_id)}
    # rg:{s<n>}:<id>:ckpt -> "ckpt": the last part names the key (store/keys.py).
    found = {key.rsplit(":", 1)[-1]: size for key, size in sizes.items() if size is not None}
    # The checkpoints before the latest are its history, which the targets leave out (section 8
    # prices it): their payloads in the ckpt hash and their entries in the run hash.
    for name, key, fields in _history_fields(r, run_id):
        part = _part(r, key, fields)
        found[name] -= part
        found["history"] = found.get("history", 0) + part
    return found


def _history_fields(r: redis.Redis, run_id: str) -> list[tuple[str, str, list[str]]]:
    latest = r.hget(keys.run(run_id), LATEST_CHECKPOINT)
    older = [f.decode() for f in r.hkeys(keys.ckpt(run_id)) if f != latest]
    if not older:
        return []
    return [
        ("ckpt", keys.ckpt(run_id), older),
        ("run", keys.run(run_id), [checkpoint_field(s) for s in older]),
    ]


def _part(r: redis.Redis, key: str, fields: list[str]) -> int:
    """What ``fields`` cost in hash ``key``: two copies of it, with and without them, compared."""
    whole, rest = "bench:memory:whole", "bench:memory:rest"
    r.copy(key, whole, replace=True)
    r.copy(key, rest, replace=True)
    r.hdel(rest, *fields)
    part = int(r.memory_usage(whole, samples=0) or 0) - int(r.memory_usage(rest, samples=0) or 0)
    r.delete(whole, rest)
    return part


def run(lab: Lab, progress: Callable[[str], None] = print) -> dict[str, Any]:
    worker = lab.start_worker("workers", QUEUE, 1)
    lab.wait_ready(worker)
    try:
        with Client(load_settings(redis_url=lab.url, queue=QUEUE)) as client:
            inputs = {"payload": "x" * PAYLOAD_BYTES}
            run_id = client.enqueue(fleet_graph.hold.name, inputs)
            wait_for(lambda: client.checkpoint_info(run_id), 60, "the first checkpoint", 0.01)
            live = _usage(client, run_id)
            client.store.client.set(fleet_graph.gate_key(run_id), 1)
            output = client.wait(run_id, timeout=60).output
            finished = _usage(client, run_id)
    finally:
        lab.stop_workers()
    progress(f"  live {sum(live.values())} B, finished {sum(finished.values())} B")
    inputs_json = json.dumps(inputs, separators=(",", ":"))
    state_json = json.dumps({"notes": [inputs["payload"]]}, separators=(",", ":"))
    return {
        "live": live,
        "finished": finished,
        "inputs_bytes": len(inputs_json),
        "state_bytes": len(state_json),
        "output_bytes": len(json.dumps(output, separators=(",", ":"))),
    }


def render(result: dict[str, Any]) -> str:
    data = result["inputs_bytes"] + result["state_bytes"]
    lines = [
        f"One run of a two-step graph whose inputs JSON is {result['inputs_bytes']} B and whose state "
        f"JSON is {result['state_bytes']} B after its first step (together {data} B). "
        "`MEMORY USAGE … SAMPLES 0` summed over the run's own keys; the global indexes are not counted.",
        "",
        "| run | run hash | long inputs | checkpoint | history (not in total) | events | traceback | total B "
        "| total / (inputs + state) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ("live", "finished"):
        u = dict(result[label])
        if "history" in u:
            u["history"] += u.pop("history:data", 0)
        total = _without_history(u)
        cells = " | ".join(str(u.get(k, "—")) for k in ("run", "in", "ckpt", "history", "events", "tb"))
        name = "live (mid-step 2, one checkpoint)" if label == "live" else "finished"
        lines.append(f"| {name} | {cells} | {total} | {total / data:.2f} |")
    live, done = _without_history(result["live"]), _without_history(result["finished"])
    history = sum(v for k, v in result["finished"].items() if k.startswith("history"))
    inputs, out = result["inputs_bytes"], result["output_bytes"]
    live_over, done_over = live - data, done - out
    lines += [
        "",
        f"- live run: inputs + state + {live_over} B "
        f"(target + {LIVE_OVER_B} B: {_verdict(live_over, LIVE_OVER_B)})",
        f"- finished run: output ({out} B) + {done_over} B; of that, the inputs the run keeps for a "
        f"replay are {inputs} B, so output + inputs + {done_over - inputs} B (target + {FINISHED_OVER_B} B: "
        f"{_verdict(done_over - inputs, FINISHED_OVER_B)})",
        f"- not counted in the totals, as the targets say: the finished run's checkpoint history "
        f"(section 8), {history} B here for the one checkpoint it keeps before the finished one",
    ]
    return "\n".join(lines)


def _without_history(usage: dict[str, int]) -> int:
    """The run's memory without its checkpoint history, which the targets leave out (section 8
    measures it)."""
    return sum(v for k, v in usage.items() if not k.startswith("history"))


def _verdict(value: int, target: int) -> str:
    return "**met**" if value <= target else "**MISSED**"
