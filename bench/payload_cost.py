"""Payloads at rest: what compression, encryption and offload cost per save, and what they save
Redis, side by side in one private redis-server.

Each checkpoint save (one EVALSHA, with its payload encoded on the way) is timed at 100 B, 64 KiB,
1 MiB and 50 MiB of state in three modes: as is (no keys, no payload store), keys (zstd and
AES-256-GCM), and keys with a file payload store (offload above 64 KiB). The state is text of
words, which compresses as prose and JSON do. Then the Redis memory a run holds (its keys'
MEMORY USAGE) after 20 saves of a 1 MiB state in each mode, and of a 50 MiB one offloaded.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from reflexr_graph.core.port import Boundary
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import keys
from reflexr_graph.store.payload_codec import PayloadCodec
from reflexr_graph.store.payload_keys import KeyRing
from reflexr_graph.store.payload_store import FilePayloadStore
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.settings import StoreOptions

KIB, MIB = 1024, 1024 * 1024
SIZES = {"100 B": 100, "64 KiB": 64 * KIB, "1 MiB": MIB, "50 MiB": 50 * MIB}
QUICK_SIZES = {"100 B": 100, "64 KiB": 64 * KIB, "1 MiB": MIB}
STEPS = 20
WORDS = [
    "the",
    "run",
    "state",
    "holds",
    "a",
    "conversation",
    "history",
    "of",
    "model",
    "calls",
    "tool",
    "results",
    "and",
    "documents",
]


def text_of(size: int, seed: int = 7) -> str:
    """JSON of about ``size`` bytes: a state of words, as compressible as prose."""
    rng = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS) + str(rng.randrange(1000))
        words.append(word)
        length += len(word) + 1
    return json.dumps({"history": " ".join(words)[:size]})


def _codecs(root: Path) -> dict[str, PayloadCodec]:
    ring = KeyRing.parse("k1:" + base64.b64encode(os.urandom(32)).decode())
    return {
        "as is": PayloadCodec(),
        "keys": PayloadCodec(ring),
        "keys + store": PayloadCodec(ring, FilePayloadStore(root)),
    }


def _claimed(store: RedisStore) -> Any:
    run_id = uuid.uuid4().hex
    store.create_run(run_id, graph="bench", inputs_json="0", max_attempts=3, dispatch_grace_ms=600_000)
    return store.claim(run_id, uuid.uuid4().hex, lease_ttl_ms=600_000).context()


def save_ms(store: RedisStore, payload: str, reps: int) -> float:
    """Median ms of one checkpoint save of ``payload``, the payload's encoding included."""
    ctx = _claimed(store)
    samples = []
    for seq in range(1, reps + 1):
        t0 = time.perf_counter()
        store.save_checkpoint(ctx, Boundary(payload, seq=seq, next_node="s"))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def run_bytes(store: RedisStore, payload: str, steps: int = STEPS) -> int:
    """Redis memory of a run's keys after ``steps`` saves of ``payload`` (the history keeps them all)."""
    ctx = _claimed(store)
    for seq in range(1, steps + 1):
        store.save_checkpoint(ctx, Boundary(payload, seq=seq, next_node="s"))
    usage = (store.client.memory_usage(key, samples=0) for key in keys.run_keys(ctx.run_id))
    return sum(int(u or 0) for u in usage)


def _row(stores: dict[str, RedisStore], payload: str, reps: int) -> dict[str, float]:
    return {mode: save_ms(store, payload, reps) for mode, store in stores.items()}


def run(reps: int = 5, *, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    steps = 3 if quick else STEPS
    root = Path(tempfile.mkdtemp(prefix="reflexr-bench-payloads-"))
    try:
        with RedisServer(appendfsync="everysec") as server:
            codecs = _codecs(root)
            # Timing keeps only the latest checkpoint (a few 50 MiB ones in Redis at most).
            timed = {
                m: RedisStore.from_url(server.url, options=StoreOptions(codec=c, checkpoint_history=0))
                for m, c in codecs.items()
            }
            saves = {
                label: {
                    m: save_ms(store, text_of(size), reps if size <= MIB else 2) for m, store in timed.items()
                }
                for label, size in sizes.items()
            }
            kept = {
                m: RedisStore.from_url(server.url, options=StoreOptions(codec=c)) for m, c in codecs.items()
            }
            memory = {f"1 MiB, {m}": run_bytes(store, text_of(MIB), steps) for m, store in kept.items()}
            if not quick:
                memory["50 MiB, keys + store"] = run_bytes(kept["keys + store"], text_of(50 * MIB), steps)
            for store in [*timed.values(), *kept.values()]:
                store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"reps": reps, "steps": steps, "saves": saves, "memory": memory}


def render(result: dict[str, Any]) -> str:
    modes = list(next(iter(result["saves"].values())))
    lines = [
        f"One checkpoint save (its payload encoded, one EVALSHA), median of {result['reps']} "
        "(1 MiB and up: 2); a state of words. Keys: zstd then AES-256-GCM; store: a file payload "
        "store, above 64 KiB.",
        "",
        "| state | " + " | ".join(f"{m} (ms)" for m in modes) + " | keys / as is | keys + store / as is |",
        "|---|" + "---|" * (len(modes) + 2),
    ]
    for label, row in result["saves"].items():
        base = row["as is"]
        cells = " | ".join(f"{row[m]:.2f}" for m in modes)
        lines.append(f"| {label} | {cells} | {row['keys'] / base:.2f} | {row['keys + store'] / base:.2f} |")
    memory = result["memory"]
    lines += [
        "",
        f"Redis memory of one run after {result['steps']} saves, every checkpoint kept:",
        "",
        "| state, mode | Redis bytes for the run |",
        "|---|---|",
        *(f"| {what} | {bytes_:,} |" for what, bytes_ in memory.items()),
        "",
        f"offloaded / as is Redis memory: {memory['1 MiB, keys + store'] / memory['1 MiB, as is']:.5f}",
    ]
    return "\n".join(lines)
