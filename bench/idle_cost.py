"""What an idle worker sends Redis by itself, beyond the broker's poll (issue 18: ≤ 2 a second).

One fleet worker (``-c 1``) serving the benchmark's graphs, with nothing to run. The full run's
window is 70 s: the loops that run about once a minute (a full presence beat, the reaper's prune
reads, the schemas' publication; each a little over a minute apart, as they follow the reaper's
ticks) then fall in it once, and those of every 10 s seven times, close to their long-run rates.
Once its reaper has made its first pass and its presence its first beat, MONITOR records every command the
server runs for ``window_s`` (those inside scripts included). The broker's own traffic (kombu's
BRPOP poll, its unacked-restore and binding bookkeeping) and connection health-check PINGs are left out,
as the target says; what is left is the worker's reaper ticks and presence beats, counted by the
script that ran them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from typing import Any

import redis

from bench.procs import Lab, wait_for
from reflexr_graph.store import keys
from reflexr_graph.store.scripts import PER_RUN, STANDALONE, source

QUEUE = "bench-idle"
TARGET_PER_S = 2.0


def broker_or_health(command: str) -> bool:
    """True for a top-level command of the broker (kombu's poll, its unacked and binding
    bookkeeping, its pipelines and scripts, its fanout subscription), a connection health check,
    or a connection's handshake (HELLO, sent again by a client that reconnected: under load a
    socket times out now and then), which the target leaves out."""
    name = command.split(" ", 1)[0].upper()
    return (
        name in {"BRPOP", "PING", "MULTI", "EXEC", "SCRIPT", "HELLO", "PSUBSCRIBE"}
        or "unacked" in command
        or "_kombu" in command
    )


def _monitor(url: str, stop: threading.Event, seen: list[tuple[str, bool]]) -> None:
    with redis.Redis.from_url(url).monitor() as m:
        for entry in m.listen():
            if stop.is_set():
                return
            seen.append((str(entry["command"]), entry.get("client_type") == "lua"))


def _script_names() -> dict[str, str]:
    # The SHA1 EVALSHA names a script by is that of its full text (redis-py's register_script).
    return {hashlib.sha1(source(n).encode()).hexdigest(): n for n in PER_RUN + STANDALONE}


def attribute(seen: list[tuple[str, bool]]) -> tuple[Counter[str], int]:
    """The worker's own commands by what sent them (a script's name, its EVALSHA and the commands
    it ran counted together; else the command's own name), and how many were the broker's."""
    names, own, broker = _script_names(), Counter[str](), 0
    sender, leave_out = "", False
    for command, in_script in seen:
        if not in_script:  # a top-level command: it, and any commands it runs, belong to it
            parts = command.split(" ", 2)
            leave_out = broker_or_health(command)
            is_script = parts[0].upper() == "EVALSHA" and len(parts) > 1
            sender = names.get(parts[1], "a script of kombu's") if is_script else parts[0].upper()
            leave_out = leave_out or sender == "a script of kombu's"
        if leave_out:
            broker += 1
        else:
            own[sender] += 1
    return own, broker


def watch_idle(url: str, window_s: float) -> tuple[dict[str, Any], list[tuple[str, bool]]]:
    """Once the worker on ``url`` has made its first reaper pass and its first beat: its
    description, and every command the server ran in the next ``window_s`` (its text, and whether
    a script ran it)."""
    r = redis.Redis.from_url(url)
    try:
        wait_for(lambda: r.exists(keys.reaper_lock(0)), 30, "the reaper's first pass")
        names: Any = wait_for(lambda: r.zrange(keys.WORKERS, 0, -1), 30, "the worker's first beat")
        described: dict[str, Any] = json.loads(r.get(keys.worker(names[0].decode())) or "{}")
        seen: list[tuple[str, bool]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_monitor, args=(url, stop, seen), daemon=True)
        watcher.start()
        stop.wait(window_s)
        stop.set()
        r.ping()  # one more line, so the watcher sees the stop
        watcher.join(10)
    finally:
        r.close()
    return described, seen


def run(lab: Lab, window_s: float, progress: Any = print) -> dict[str, Any]:
    worker = lab.start_worker("workers", QUEUE, 1)
    lab.wait_ready(worker)
    try:
        described, seen = watch_idle(lab.url, window_s)
    finally:
        lab.stop_workers()
    own, broker = attribute(seen)
    progress(f"  {own.total()} own commands in {window_s:.0f} s")
    return {
        "window_s": window_s,
        "graphs": len(described.get("graphs", [])),
        "own": own.total(),
        "broker": broker,
        "by_script": dict(own),
    }


def render(result: dict[str, Any]) -> str:
    per_s = result["own"] / result["window_s"]
    verdict = "**met**" if per_s <= TARGET_PER_S else "**MISSED**"
    by = ", ".join(f"{name} {n}" for name, n in sorted(result["by_script"].items(), key=lambda kv: -kv[1]))
    return "\n".join(
        [
            f"One idle worker (`-c 1`) serving {result['graphs']} graphs; MONITOR over "
            f"{result['window_s']:.0f} s after its first reaper pass and presence beat. Counted: every "
            "command the server runs for it (inside scripts too), except the broker's (BRPOP, "
            "kombu's unacked and binding bookkeeping: its MULTIs and scripts) and health-check PINGs.",
            "",
            f"- its own commands: {result['own']} in {result['window_s']:.0f} s = {per_s:.2f} a second "
            f"(target ≤ {TARGET_PER_S:g}: {verdict})",
            f"- by the script that ran them (a script's EVALSHA and the commands it ran): {by}",
            f"- left out, the broker's and health checks': {result['broker']}",
        ]
    )
