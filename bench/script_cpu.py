"""Server time per call of the scripts a durable run makes, old scripts beside new on one server.

``python -m bench.script_cpu [--against REV] [--runs N] [--rounds R] [--saves S]``: not a
section of ``python -m bench`` and not in the test suite; a tool for working on the Lua scripts.

A private redis-server (no AOF: what is measured is the command itself) logs every command in
its SLOWLOG (``slowlog-log-slower-than 0``), whose duration is the server's own time for the
call, Lua and the commands it runs included, and nothing of the network. Five-step runs go
through the store's API (``create_run``, the claim, ``saves`` checkpoints and ``succeed`` with
the finished checkpoint), and the log, read after each round, is grouped by SHA.

With ``--against``, the Lua of that git revision (its ``reflexr_graph`` package, ``git archive``
into a temp dir, gives each script's full text, as its own ``scripts.source`` builds it) is
measured too: a second store of this tree's calls those texts, its runs taking turns with this
tree's, run by run, so both meet the same load on the machine (running the two apart, or
even at once in two processes, made the same text differ by more than the changes measured).
This tree's Python drives both, so the revision's scripts must take the same arguments. The
figures beside each other are the comparison, not either one alone (a shared machine is noisy);
the same text in both is one SHA, whose calls count for both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections import defaultdict
from io import BytesIO
from pathlib import Path

import redis

from reflexr_graph.core.port import Boundary
from reflexr_graph.local_redis import RedisServer
from reflexr_graph.store import RedisStore, scripts

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ("create_run", "claim", "save_checkpoint", "succeed")
SAVES = 4
"""Saves per run by default: a five-step run's (its fifth checkpoint is the success's)."""
STATE = '{"data": "", "count": %d}'
"""As bench.fleet_graph's five_steps states are: small, so the run hash stays a listpack, where a
field is found by a scan and every field a script asks for costs it in proportion to the hash."""
THIS = "this tree"
_SOURCES = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); from reflexr_graph.store import scripts; "
    "print(json.dumps({n: scripts.source(n) for n in scripts.PER_RUN + scripts.STANDALONE}))"
)


def _sources_of(rev: str) -> dict[str, str]:
    """Each script's full text at ``rev``, as that revision's own scripts.source builds it."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "reflexr_graph"],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="script-cpu-") as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        out = subprocess.run(
            [sys.executable, "-c", _SOURCES, tmp], cwd=tmp, check=True, capture_output=True, text=True
        ).stdout
    texts: dict[str, str] = json.loads(out)
    return texts


def _store(url: str, texts: dict[str, str] | None) -> RedisStore:
    """A store of this tree; with ``texts``, one that calls those scripts instead of its own."""
    store = RedisStore.from_url(url)
    if texts is not None:
        registered = store.scripts._scripts  # a bench tool: the texts are swapped under the store
        for name in registered:
            registered[name] = store.client.register_script(texts[name])
    return store


def _run(store: RedisStore, run_id: str, saves: int) -> None:
    store.create_run(
        run_id,
        graph="bench",
        inputs_json='{"n": 1}',
        state_json=STATE % 0,
        max_attempts=3,
        dispatch_grace_ms=60_000,
    )
    ctx = store.claim(run_id, f"tok-{run_id}", lease_ttl_ms=30_000).context()
    for seq in range(1, saves + 1):
        store.save_checkpoint(ctx, Boundary(STATE % seq, seq=seq, next_node=f"s{seq}"))
    store.succeed(ctx, "5", checkpoint=STATE % (saves + 1), seq=saves + 1)


def _round(
    r: redis.Redis,
    stores: dict[str, RedisStore],
    shas: dict[str, tuple[list[str], str]],
    runs: int,
    saves: int,
) -> dict[str, dict[str, list[float]]]:
    """``runs`` runs of each variant, taking turns (the order swapped every run)."""
    r.slowlog_reset()
    prefix = uuid.uuid4().hex[:8]
    order = list(stores)
    for i in range(runs):
        for variant in order if i % 2 else reversed(order):
            _run(stores[variant], f"{prefix}-{variant[:8]}-{i}", saves)
    took: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in stores}
    for entry in r.slowlog_get(-1):
        command = entry["command"].split()
        if command and command[0].upper() == b"EVALSHA" and len(command) > 1:
            owners, name = shas.get(command[1].decode(), ([], ""))
            for variant in owners:
                took[variant][name].append(float(entry["duration"]))
    return took


def compare(against: str | None, runs: int, rounds: int, saves: int) -> None:
    """Rounds of every variant's runs on one private server; print µs per call per script."""
    texts: dict[str, dict[str, str] | None] = {THIS: None}
    if against:
        texts = {against: _sources_of(against), **texts}
    shas: dict[str, tuple[list[str], str]] = {}
    for variant, by_name in texts.items():
        for name in MEASURED:
            text = scripts.source(name) if by_name is None else by_name[name]
            shas.setdefault(hashlib.sha1(text.encode()).hexdigest(), ([], name))[0].append(variant)
    server = RedisServer(appendonly=False).start()
    stores: dict[str, RedisStore] = {}
    try:
        r = redis.Redis.from_url(server.url)
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", runs * (saves + 4) * len(texts) * 2 + 1000)
        stores = {variant: _store(server.url, by_name) for variant, by_name in texts.items()}
        _round(r, stores, shas, 5, saves)  # warm up: scripts loaded, the events template made
        took: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in texts}
        for _ in range(rounds):
            for variant, by_name in _round(r, stores, shas, runs, saves).items():
                for name, durations in by_name.items():
                    took[variant][name].extend(durations)
        r.close()
    finally:
        for store in stores.values():
            store.close()
        server.close()
    _print(took, runs * rounds, {"create_run": 1, "claim": 1, "save_checkpoint": saves, "succeed": 1})


def _print(took: dict[str, dict[str, list[float]]], runs: int, calls: dict[str, int]) -> None:
    print(f"server µs per call (SLOWLOG): lower quartile, median, mean of {runs} runs per variant")
    print(f"{'script':<16}" + "".join(f"{v:>24}" for v in took))
    per_run = dict.fromkeys(took, 0.0)
    for name in MEASURED:
        cells = []
        for variant, by_name in took.items():
            durations = by_name.get(name, [])
            if not durations:
                cells.append(f"{'-':>24}")
                continue
            per_run[variant] += statistics.fmean(durations) * calls[name]
            quartile = statistics.quantiles(durations, n=4)[0]
            cells.append(
                f"{quartile:>8.1f}{statistics.median(durations):>8.1f}{statistics.fmean(durations):>8.1f}"
            )
        print(f"{name:<16}" + "".join(cells))
    print(f"{'per run (sum)':<16}" + "".join(f"{per_run[v]:>24.1f}" for v in took))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--against", help="a git revision whose scripts are measured beside this tree's, e.g. main"
    )
    parser.add_argument("--runs", type=int, default=100, help="runs per round and variant")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--saves", type=int, default=SAVES, help="checkpoints saved per run before the success"
    )
    args = parser.parse_args()
    compare(args.against, args.runs, args.rounds, args.saves)


if __name__ == "__main__":
    main()
