"""Server time per call of the scripts a durable run makes, old code beside new on one server.

``python -m bench.script_cpu [--against REV] [--runs N] [--rounds R] [--saves S]``: not a section of
``python -m bench`` and not in the test suite; a tool for working on the Lua scripts.

A private redis-server (no AOF: what is measured is the command itself) logs every command in
its SLOWLOG (``slowlog-log-slower-than 0``), whose duration is the server's own time for the
call, Lua and the commands it runs included, and nothing of the network. Each round, a child
process per variant drives ``runs`` five-step runs through the store's API (``create_run``,
the claim, four ``save_checkpoint`` and ``succeed`` with the finished checkpoint) and names the script behind
each SHA; the log is read after it and grouped by SHA. With ``--against``, the reflexr_graph
package of that git revision (``git archive`` into a temp dir) is measured too, its driver
running at the same time as this tree's on the same server, so both meet the same load on the
machine: the figures beside each other are the comparison, not either one alone (a shared
machine is noisy). The same script text in both counts for both.
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

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("create_run", "claim", "save_checkpoint", "succeed")
SAVES = 4
"""Saves per run by default: a five-step run's (its fifth checkpoint is the success's)."""
STATE = '{"data": "", "count": %d}'
"""As bench.fleet_graph's five_steps states are: small, so the run hash stays a listpack, where a
field is found by a scan and every field a script asks for costs it in proportion to the hash."""


def drive(url: str, code: str, runs: int, saves: int) -> dict[str, object]:
    """``runs`` runs through the store of the package found in ``code``; its SHAs by script name."""
    sys.path.insert(0, code)
    # Imported only now, after the path is set: a driver measures the package it was given.
    from reflexr_graph.store import RedisStore, scripts

    store = RedisStore.from_url(url)
    prefix = uuid.uuid4().hex[:8]
    for i in range(runs):
        run_id = f"{prefix}-{i}"
        store.create_run(
            run_id,
            graph="bench",
            inputs_json='{"n": 1}',
            state_json=STATE % 0,
            max_attempts=3,
            dispatch_grace_ms=60_000,
        )
        claim = store.claim(run_id, f"tok-{run_id}", lease_ttl_ms=30_000)
        ctx = claim.context()
        for seq in range(1, saves + 1):
            store.save_checkpoint(ctx, STATE % seq, seq=seq, next_node=f"s{seq}")
        store.succeed(ctx, "5", checkpoint=STATE % (saves + 1), seq=saves + 1)
    store.close()
    shas = {hashlib.sha1(scripts.source(name).encode()).hexdigest(): name for name in SCRIPTS}
    return {"shas": shas, "package": scripts.__file__}


def _export(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "reflexr_graph"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _round(
    r: redis.Redis, url: str, variants: dict[str, str], runs: int, saves: int
) -> dict[str, dict[str, list[float]]]:
    """One round: every variant's driver at once, so each meets the same load on the machine."""
    r.slowlog_reset()
    drivers = {
        variant: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.script_cpu",
                "--drive",
                url,
                "--code",
                code,
                "--runs",
                str(runs),
                "--saves",
                str(saves),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for variant, code in variants.items()
    }
    shas: dict[str, tuple[list[str], str]] = {}
    for variant, proc in drivers.items():
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"the driver of {variant} failed")
        told = json.loads(out)
        if not str(told["package"]).startswith(variants[variant]):
            raise RuntimeError(f"the driver measured {told['package']}, not the tree in {variants[variant]}")
        # The same text in two variants is the same SHA: its calls count for both.
        for sha, name in told["shas"].items():
            shas.setdefault(sha, ([], name))[0].append(variant)
    took: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in variants}
    for entry in r.slowlog_get(-1):
        command = entry["command"].split()
        if command and command[0].upper() == b"EVALSHA" and len(command) > 1:
            owners, name = shas.get(command[1].decode(), ([], ""))
            for variant in owners:
                took[variant][name].append(float(entry["duration"]))
    return took


def compare(against: str | None, runs: int, rounds: int, saves: int) -> None:
    """Rounds of every variant at once on one private server; print µs per call per script."""
    # Not at the top: a driver (--drive) imports reflexr_graph from the tree it is given.
    from reflexr_graph.local_redis import RedisServer

    variants = {"this tree": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="script-cpu-") as tmp:
        if against:
            _export(against, Path(tmp))
            variants = {against: tmp, **variants}
        server = RedisServer(appendonly=False).start()
        try:
            r = redis.Redis.from_url(server.url)
            r.config_set("slowlog-log-slower-than", 0)
            r.config_set("slowlog-max-len", runs * (saves + 4) * len(variants) * 2 + 1000)
            took: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in variants}
            _round(r, server.url, variants, 5, saves)  # warm up: scripts loaded, the events template made
            for _ in range(rounds):
                for variant, by_name in _round(r, server.url, variants, runs, saves).items():
                    for name, durations in by_name.items():
                        took[variant][name].extend(durations)
            r.close()
        finally:
            server.close()
    _print(took, runs * rounds, {"create_run": 1, "claim": 1, "save_checkpoint": saves, "succeed": 1})


def _print(took: dict[str, dict[str, list[float]]], runs: int, calls: dict[str, int]) -> None:
    print(f"server µs per call (SLOWLOG): lower quartile, median, mean of {runs} runs per variant")
    print(f"{'script':<16}" + "".join(f"{v:>24}" for v in took))
    per_run = dict.fromkeys(took, 0.0)
    for name in SCRIPTS:
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to measure beside this tree, e.g. main")
    parser.add_argument("--runs", type=int, default=100, help="runs per round and variant")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--saves", type=int, default=SAVES, help="checkpoints saved per run before the success"
    )
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        print(json.dumps(drive(args.drive, args.code, args.runs, args.saves)))
    else:
        compare(args.against, args.runs, args.rounds, args.saves)


if __name__ == "__main__":
    main()
