"""Fill a store with many runs fast, through the store's own Lua scripts, pipelined; and count what
an operation costs Redis. The store-at-scale benchmark (bench/store_scale.py) and its test
(tests/store/test_scale.py) share both, so the test checks what the benchmark measures.

Each run goes the way a worker takes it: ``create_run``, ``claim``, then ``succeed``, ``fail``
(permanent: dead-lettered) or ``wait`` (for a signal, no timer). Every script call of a batch
goes in one pipeline, so a million runs cost a few thousand round trips rather than millions.
The scripts' arguments are those ``store/attempts.py`` and ``store/waits.py`` pass; every
reply is checked, so a loader that drifted from the scripts fails loudly instead of filling
the store with something else.

Runs are created 1 ms apart, ending now, so the indexes hold distinct scores as a real
fleet's would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from reflexr_graph import clock
from reflexr_graph.client import Client
from reflexr_graph.fleet.reaper import Reaper
from reflexr_graph.model import Status
from reflexr_graph.store import RedisStore, keys
from reflexr_graph.store.attempts import NewRun, create_args
from reflexr_graph.store.contracts import ClaimArgs, FailArgs, SucceedArgs, WaitArgs
from reflexr_graph.store.ops import ScriptArg
from reflexr_graph.store.records import text

GRAPH = "bench_scale"
INPUTS = json.dumps({"order": "A-1001", "items": 3})
OUTPUT = json.dumps({"total": 42})
CHECKPOINT = json.dumps({"format": 1, "graph": GRAPH, "finished": True, "output": {"total": 42}})
BATCH = 2000
LEASE_MS = 60_000


@dataclass(frozen=True)
class Mix:
    """How many runs of each kind to load."""

    finished: int
    dead: int
    waiting: int

    @property
    def total(self) -> int:
        return self.finished + self.dead + self.waiting

    def scaled(self, factor: float) -> Mix:
        return Mix(int(self.finished * factor), int(self.dead * factor), int(self.waiting * factor))


Stage = tuple[str, Callable[[str, int], list[ScriptArg]], Callable[[object], bool]]
"""A script, the ARGV it gets for (run id, now ms), and the check of its reply."""


def _per_run(run_id: str, now: int, args: Sequence[ScriptArg]) -> list[ScriptArg]:
    return [run_id, now, run_id, *args]


def _token(run_id: str) -> str:
    return f"t-{run_id}"


def _new(run_id: str, retention_s: int) -> NewRun:
    return NewRun(
        run_id=run_id,
        graph=GRAPH,
        inputs_json=INPUTS,
        state_json=None,
        idempotency_key=None,
        max_attempts=3,
        dispatch_grace_ms=60_000,
        retention_s=retention_s,
    )


def _failure(store: RedisStore, run_id: str, now: int) -> list[ScriptArg]:
    """fail.lua's ARGV: a permanent, counted failure with no notes."""
    return FailArgs(
        token=_token(run_id),
        error_type="ValueError",
        message="the order was refused",
        traceback="",
        reason="step_failed",
        permanent=True,
        retry_due_ms=now,
        dead_retention_s=store.options.dead_retention_s,
        counted=True,
        max_interruptions=store.options.max_interruptions,
        skipped=0,
        skip_kinds="",
        reused_steps=0,
        reused_calls=0,
    ).argv()


def _succeeded(store: RedisStore, run_id: str) -> list[ScriptArg]:
    """succeed.lua's ARGV: the output, with the finished checkpoint at seq 2 and no notes."""
    return SucceedArgs(
        token=_token(run_id),
        output=OUTPUT,
        retention_s=store.options.run_retention_s,
        checkpoint=CHECKPOINT,
        seq=2,
        skipped=0,
        skip_kinds="",
        reused_steps=0,
        reused_calls=0,
        history=store.options.checkpoint_history,
    ).argv()


def _stages(store: RedisStore, kind: str) -> list[Stage]:
    """create_run, claim, then the script that ends a claimed run of ``kind``."""
    run_s, dead_s = store.options.run_retention_s, store.options.dead_retention_s

    create: Stage = (
        "create_run",
        lambda rid, now: _per_run(rid, now, create_args(_new(rid, run_s), now)),
        lambda reply: isinstance(reply, list) and text(reply[0]) == "created",
    )
    claim: Stage = (
        "claim",
        lambda rid, now: _per_run(rid, now, ClaimArgs(_token(rid), now + LEASE_MS, dead_s, "w@bench").argv()),
        lambda reply: isinstance(reply, list) and text(reply[0]) == "claimed",
    )
    ends: dict[str, Stage] = {
        "finished": (
            "succeed",
            lambda rid, now: _per_run(rid, now, _succeeded(store, rid)),
            lambda reply: reply == 1,
        ),
        "dead": (
            "fail",
            lambda rid, now: _per_run(rid, now, _failure(store, rid, now)),
            lambda reply: text(reply) == "dead",
        ),
        "waiting": (
            "wait",
            lambda rid, now: _per_run(
                rid, now, WaitArgs(_token(rid), "approval", "wait:approval", None, 0).argv()
            ),
            lambda reply: isinstance(reply, list) and text(reply[0]) == "waiting",
        ),
    }
    return [create, claim, ends[kind]]


def _batch(store: RedisStore, kind: str, run_ids: list[str], start_ms: int) -> None:
    for name, build, ok in _stages(store, kind):
        pipe = store.client.pipeline(transaction=False)
        for i, run_id in enumerate(run_ids):
            # create_run's K_EXPECTED and K_TEMPLATE: the idem owner's run hash, the events template
            template = keys.events_template(store.shards.of(run_id))
            extra = [keys.run(run_id), template] if name == "create_run" else []
            script_keys = keys.script_keys(run_id, run_id, store.shards, extra)
            store._scripts.queue(pipe, name, script_keys, build(run_id, start_ms + i))
        replies = pipe.execute()
        bad = [reply for reply in replies if not ok(reply)]
        if bad:
            raise RuntimeError(f"{name} answered {bad[0]!r} for {len(bad)} of {len(run_ids)} runs")


def fill(store: RedisStore, mix: Mix, *, prefix: str = "s", progress: Callable[[str], None] = print) -> None:
    """Load ``mix`` into the store, in batches of :data:`BATCH` runs per pipeline."""
    start = clock.now_ms() - mix.total
    offset = 0
    for kind, count in (("finished", mix.finished), ("dead", mix.dead), ("waiting", mix.waiting)):
        for first in range(0, count, BATCH):
            ids = [f"{prefix}-{kind}-{n}" for n in range(first, min(count, first + BATCH))]
            _batch(store, kind, ids, start + offset)
            offset += len(ids)
            if (first // BATCH) % 50 == 49:
                progress(f"    {kind}: {first + len(ids)} of {count}")


@dataclass(frozen=True)
class Cost:
    commands: int
    server_us: int
    wall_ms: float


def counted(r: redis.Redis, fn: Callable[[], object]) -> Cost:
    """What ``fn`` cost Redis (commands, server µs, Lua's included) and the wall clock."""
    r.config_resetstat()
    t0 = time.perf_counter()
    fn()
    wall = (time.perf_counter() - t0) * 1000
    stats: dict[str, Any] = r.info("commandstats")
    mine = {k: v for k, v in stats.items() if k not in ("cmdstat_config", "cmdstat_info")}
    return Cost(sum(v["calls"] for v in mine.values()), sum(v["usec"] for v in mine.values()), wall)


def operations(client: Client, reaper: Reaper) -> dict[str, Callable[[], object]]:
    """The reaper's tick and what each read-only CLI command asks of the store (``cli/``)."""
    some_run = client.runs(status=Status.SUCCEEDED, limit=1)[0].run_id
    return {
        "reaper tick": reaper.tick,
        "`runs` (newest 50)": lambda: client.runs(limit=50),
        "`runs --status succeeded`": lambda: client.runs(status=Status.SUCCEEDED, limit=50),
        "`runs --graph G` (G: every run)": lambda: client.runs(graph=GRAPH, limit=50),
        "`dlq list` (newest 1,000)": lambda: client.dead_letters(),
        "`status RUN`": lambda: client.get(some_run),
        "`history RUN`": lambda: client.events(some_run),
        "API page, graph matching none": lambda: client.runs_page(graph="no-such-graph", limit=50),
    }
