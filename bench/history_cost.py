"""What the checkpoint history (issue 11, time travel) costs: Redis memory per checkpoint kept,
and the time of a save that keeps one, against a save that keeps none.

Side by side in one run, on a private redis-server: for each state size, one run in a store
that keeps ``REFLEXR_CHECKPOINT_HISTORY`` checkpoints before the latest and one in a store that
keeps none (0, as before the history), each saving the same checkpoints. ``MEMORY USAGE ...
SAMPLES 0`` summed over each run's keys; the difference, divided by the checkpoints the first
run keeps beyond the latest, is the memory one kept checkpoint costs, set against the size of
its JSON. The same two stores then time their saves, interleaved; each save of the first moves
the checkpoint it replaces into the full history and trims the oldest.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

from reflexr_graph.core.port import AttemptContext, Boundary
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import keys
from reflexr_graph.store.redis_store import DEFAULT_CHECKPOINT_HISTORY, RedisStore
from reflexr_graph.store.settings import StoreOptions

SIZES = {"100 B": 100, "1 KB": 1_000, "10 KB": 10_000}
LONG_HISTORY = 1_000
"""A history past Redis's compact encodings (128 entries), for the 1 KB state."""


def _payload(seq: int, state_bytes: int) -> str:
    """A checkpoint's JSON shaped like the attempt's, with a state of about ``state_bytes``."""
    return json.dumps(
        {
            "format": 1, "graph": "bench", "fingerprint": "0" * 32, "seq": seq, "finished": False,
            "state": {"notes": "x" * state_bytes}, "inputs": None, "inputs_ref": "run",
            "next": {"node_id": "step", "inputs": seq, "fork_stack": []}, "output": None,
        },
        separators=(",", ":"),
    )  # fmt: skip


def _claimed(store: RedisStore) -> AttemptContext:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph="bench", inputs_json="0", max_attempts=3, dispatch_grace_ms=600_000)
    return store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()


def _usage(store: RedisStore, run_id: str) -> int:
    sizes = [store.client.memory_usage(key, samples=0) for key in keys.run_keys(run_id)]
    return sum(size for size in sizes if size is not None)


def _kept_cost(keeping: RedisStore, plain: RedisStore, state_bytes: int, keep: int) -> dict[str, Any]:
    """Memory of ``keep`` checkpoints kept, per checkpoint, against the same run keeping none."""
    saves = keep + 1
    runs = (_claimed(keeping), _claimed(plain))
    for ctx, store in zip(runs, (keeping, plain), strict=True):
        for seq in range(1, saves + 1):
            store.save_checkpoint(ctx, Boundary(_payload(seq, state_bytes), seq=seq, next_node="step"))
    kept = len(keeping.checkpoints(runs[0].run_id)) - 1
    with_history, without = _usage(keeping, runs[0].run_id), _usage(plain, runs[1].run_id)
    per = (with_history - without) / kept
    size = len(_payload(saves, state_bytes))
    return {
        "keep": kept,
        "checkpoint_bytes": size,
        "per_kept": per,
        "overhead": per - size,
        "total": per * kept,
    }


def _save_times(
    keeping: RedisStore, plain: RedisStore, state_bytes: int, n: int, keep: int
) -> dict[str, float]:
    """Median µs per save, the history full (each save also trims one) against no history."""
    full, bare = _claimed(keeping), _claimed(plain)
    for seq in range(1, keep + 2):
        keeping.save_checkpoint(full, Boundary(_payload(seq, state_bytes), seq=seq, next_node="step"))
    times: dict[str, list[float]] = {"history": [], "none": []}
    for seq in range(keep + 2, keep + 2 + n):
        payload = _payload(seq, state_bytes)
        for label, store, ctx in (("history", keeping, full), ("none", plain, bare)):
            t0 = time.perf_counter()
            store.save_checkpoint(ctx, Boundary(payload, seq=seq, next_node="step"))
            times[label].append(time.perf_counter() - t0)
    return {label: statistics.median(samples) * 1e6 for label, samples in times.items()}


def run(saves: int = 300) -> dict[str, Any]:
    keep = DEFAULT_CHECKPOINT_HISTORY
    with RedisServer(appendfsync="everysec") as server:
        keeping = RedisStore.from_url(server.url, options=StoreOptions(checkpoint_history=keep))
        long = RedisStore.from_url(server.url, options=StoreOptions(checkpoint_history=LONG_HISTORY))
        plain = RedisStore.from_url(server.url, options=StoreOptions(checkpoint_history=0))
        for store in (keeping, long, plain):
            store.preload_scripts()
        rows = []
        for label, state_bytes in SIZES.items():
            row = {"state": label, **_kept_cost(keeping, plain, state_bytes, keep)}
            row["save_us"] = _save_times(keeping, plain, state_bytes, saves, keep)
            rows.append(row)
        rows.append({"state": "1 KB", **_kept_cost(long, plain, SIZES["1 KB"], LONG_HISTORY)})
        for store in (keeping, long, plain):
            store.close()
    return {"rows": rows, "saves": saves, "keep": keep}


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Each state size: a run keeping REFLEXR_CHECKPOINT_HISTORY={r['keep']} (the default) checkpoints "
        "before the latest, beside the same run keeping 0; `MEMORY USAGE … SAMPLES 0` over the run's "
        f"keys. Save times: median of {r['saves']} saves each, interleaved, the history full (each save "
        "also trims the oldest).",
        "",
        "| state | kept | checkpoint JSON B | memory per checkpoint kept B | overhead B | per kept / JSON "
        "| a full history B | save µs, history / none |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        times = row.get("save_us")
        save = (
            f"{times['history']:.0f} / {times['none']:.0f} = {times['history'] / times['none']:.2f}"
            if times
            else "—"
        )
        ratio = row["per_kept"] / row["checkpoint_bytes"]
        lines.append(
            f"| {row['state']} | {row['keep']} | {row['checkpoint_bytes']} | {row['per_kept']:.0f} | "
            f"{row['overhead']:.0f} | {ratio:.2f} | {row['total']:.0f} | {save} |"
        )
    lines += [
        "",
        "A kept checkpoint costs its JSON plus a fixed overhead (its field in the run's checkpoint hash and "
        "its entry in the run hash). Each is stored once, by the save that made it the latest; the run "
        "points at the latest. "
        "The history expires with the run (its retention).",
    ]
    return "\n".join(lines)
