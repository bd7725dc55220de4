"""What an idle worker costs Redis by itself, beyond the broker's poll: counted, so it cannot creep back.

An idle worker's own traffic is its reaper (one ``reaper_tick.lua`` per wake: at most every
``Reaper.idle_s`` with nothing due and no lease to lapse) and its presence beat (every
``presence.BEAT_EVERY_S``). MONITOR shows every command the server runs, those inside scripts
included; the broker's (kombu's BRPOP poll, its unacked-restore mutex) and connection health-check
PINGs are left out. The bound is what those two loops may send in the window, counted generously
(one wake and one beat more than the window holds, every beat a full one), not a timing.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

from reflexr_graph.fleet import presence
from reflexr_graph.fleet.reaper import IDLE_MAX_S
from reflexr_graph.store import keys
from tests.fleet.conftest import Fleet
from tests.waiting import wait_for

WINDOW_S = 12.0
TICK_COMMANDS = 12
"""A reaper tick: the EVALSHA and at most 11 commands inside it (lua/reaper_tick.lua, _pass.lua)."""


def _beat_commands(graphs: int) -> int:
    """A full presence beat (lua/worker_beat.lua): the EVALSHA, 3 on the registry, 3 per graph."""
    return 1 + 3 + 3 * graphs


def _broker_or_health(command: str) -> bool:
    name = command.split(" ", 1)[0].upper()
    return name in {"BRPOP", "PING"} or "unacked" in command


def _monitor(url: str, stop: threading.Event, seen: list[str]) -> None:
    with redis.Redis.from_url(url).monitor() as m:
        for entry in m.listen():
            if stop.is_set():
                return
            seen.append(str(entry["command"]))


@pytest.mark.slow
def test_an_idle_worker_sends_a_few_commands_per_idle_wake_not_every_tick(fleet: Fleet) -> None:
    fleet.start(REFLEXR_LEASE_TTL_S="30")
    r = redis.Redis.from_url(fleet.redis_url)
    try:
        wait_for(lambda: r.exists(keys.reaper_lock(0)), 20, "the reaper's first pass")
        names: Any = wait_for(lambda: r.zrange(keys.WORKERS, 0, -1), 20, "the worker's first beat")
        graphs = len(json.loads(r.get(keys.worker(names[0].decode())) or "{}")["graphs"])
        seen: list[str] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_monitor, args=(fleet.redis_url, stop, seen), daemon=True)
        watcher.start()
        stop.wait(WINDOW_S)
        stop.set()
        r.ping()  # one more line, so the watcher sees the stop
        watcher.join(10)
        own = [c for c in seen if not _broker_or_health(c)]
        idle_s = min(IDLE_MAX_S, 30.0)
        wakes = int(WINDOW_S // idle_s) + 1
        beats = int(WINDOW_S // presence.BEAT_EVERY_S) + 1
        bound = wakes * TICK_COMMANDS + beats * _beat_commands(graphs)
        assert len(own) <= bound, (len(own), bound, own)
        # A reaper ticking every second would send 12 a second on its own.
        assert len(own) / WINDOW_S < TICK_COMMANDS / 2
    finally:
        r.close()
