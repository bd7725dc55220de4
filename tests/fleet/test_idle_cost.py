"""What an idle worker costs Redis by itself, beyond the broker's poll: counted, so it cannot creep back.

An idle worker's own traffic comes from four loops, each with its period: the reaper (one
``reaper_tick.lua`` per wake, at most every ``Reaper.idle_s``; its prune reads about once a
minute), the scheduler (one ZRANGE per ``scheduler.INTERVAL_S``), presence (a heartbeat ZADD with
the TIME that samples the store's clock, and the look for held versions every ``BEAT_EVERY_S``; a
full beat about every ``FULL_EVERY_S``, a trim
about every ``TRIM_EVERY_S``; the read of each graph's versions for auto-upgrades, one HGETALL each
every ``auto_upgrade.ENTRIES_EVERY_S``) and the schemas' publication (every
``PUBLISH_EVERY_S``). MONITOR
shows every command the server runs, those inside scripts included, and bench/idle_cost.py tells
each one's sender and leaves out the broker's and health checks'. The bounds are what each loop may
send in the window (one run of each more than the window holds), per sender, not a timing; and the
loops' periods must keep the long-run rate within issue 18's 2 a second.
"""

from __future__ import annotations

import hashlib

import pytest

from bench.idle_cost import TARGET_PER_S, attribute, watch_idle
from reflexr_graph import clock
from reflexr_graph.fleet import auto_upgrade, presence, scheduler
from reflexr_graph.fleet.reaper import IDLE_MAX_S
from reflexr_graph.fleet.reaping.prune import PRUNE_EVERY_S
from reflexr_graph.fleet.reaping.publish import PUBLISH_EVERY_S
from reflexr_graph.store.scripts import source
from tests.fleet.conftest import Fleet

WINDOW_S = 22.0
"""Long enough to hold two beats and two reaper wakes whatever its start, so each loop's period shows."""
TICK_COMMANDS = 9
"""A reaper tick: the EVALSHA and 8 commands inside it (lua/reaper_tick.lua, _pass.lua)..."""
PRUNE_READS = 3
"""...and, on a tick that prunes, one read of each terminal status set."""
BEAT_COMMANDS = 2
"""A beat between full ones: the heartbeat's ZADD and the ZRANGE of the held versions (the full
beat's script samples the store's clock, in its own reply)."""


def full_beat(served: int) -> int:
    """A full beat (lua/worker_beat.lua): the EVALSHA, its ZADD, SET and TIME, one ZADD per served
    set, and a PEXPIRE for each set it was added to anew (none once the worker is in them)."""
    return 4 + 2 * served


def trim(served: int) -> int:
    """A trim on top: the registry's ZREMRANGEBYSCORE, and one and a PEXPIRE per served set."""
    return 1 + 2 * served


def long_run_per_s(graphs: int, served: int) -> float:
    """What the loops send a second on average, from their periods (a full beat in steady state)."""
    slack = presence.BEAT_EVERY_S / 2
    return (
        TICK_COMMANDS / IDLE_MAX_S
        + PRUNE_READS / PRUNE_EVERY_S
        + 1 / scheduler.INTERVAL_S
        + BEAT_COMMANDS / presence.BEAT_EVERY_S
        + 1 / clock.RESAMPLE_S  # at most: a full beat's own sample usually makes it unneeded
        + (4 + served) / (presence.FULL_EVERY_S - slack)
        + trim(served) / (presence.TRIM_EVERY_S - slack)
        + (1 + graphs) / PUBLISH_EVERY_S  # an HMGET of the schemas, an HSETNX per version
        + graphs / auto_upgrade.ENTRIES_EVERY_S  # an HGETALL of each graph's versions
    )


def _most(period_s: float) -> int:
    """The most runs of a loop with this period in the window."""
    return int(WINDOW_S // period_s) + 1


@pytest.mark.slow
def test_an_idle_worker_sends_what_its_loops_periods_allow_within_two_a_second(fleet: Fleet) -> None:
    fleet.start(REFLEXR_LEASE_TTL_S="30")
    described, seen = watch_idle(fleet.redis_url, WINDOW_S)
    graphs = len(described["graphs"])
    served = graphs + len(described.get("graph_versions", {}))
    own, _broker = attribute(seen)
    beat_sha = hashlib.sha1(source("worker_beat").encode()).hexdigest()
    full_beats = sum(1 for c, in_script in seen if not in_script and c.startswith(f"EVALSHA {beat_sha}"))
    pruned = sum(
        1 for c, in_script in seen if in_script and c.startswith("ZRANGEBYSCORE") and ":status:" in c
    )
    slack = presence.BEAT_EVERY_S / 2
    found = {
        "reaper ticks": own.pop("reaper_tick", 0) - pruned,
        "prune reads": pruned,
        "scheduler and held-version reads": own.pop("ZRANGE", 0),
        "heartbeats": own.pop("ZADD", 0),
        "clock samples": own.pop("TIME", 0),
        "full beats": own.pop("worker_beat", 0),
        "schema publication": own.pop("HMGET", 0) + own.pop("HSETNX", 0) + own.pop("HSET", 0),
        "auto-upgrade looks": own.pop("HGETALL", 0),
    }
    bound = {
        "reaper ticks": _most(IDLE_MAX_S) * TICK_COMMANDS,
        "prune reads": _most(PRUNE_EVERY_S) * PRUNE_READS,
        "scheduler and held-version reads": _most(scheduler.INTERVAL_S) + _most(presence.BEAT_EVERY_S),
        "heartbeats": _most(presence.BEAT_EVERY_S),
        # The store samples Redis's time at most once a clock.RESAMPLE_S (the full beat's
        # own, inside its script, is not a command of its own).
        "clock samples": _most(clock.RESAMPLE_S),
        "full beats": _most(presence.FULL_EVERY_S - slack) * full_beat(served)
        + _most(presence.TRIM_EVERY_S - slack) * trim(served),
        "schema publication": _most(PUBLISH_EVERY_S) * (2 + graphs),
        "auto-upgrade looks": _most(auto_upgrade.ENTRIES_EVERY_S) * graphs,
    }
    found["full beats made"], bound["full beats made"] = full_beats, _most(presence.FULL_EVERY_S - slack)
    over = {name: (n, bound[name]) for name, n in found.items() if n > bound[name]}
    assert not over, (over, found)
    assert not own, f"commands from no known loop: {dict(own)}"
    # The periods themselves: an idle worker sends at most issue 18's 2 a second in the long run.
    assert long_run_per_s(graphs, served) <= TARGET_PER_S, long_run_per_s(graphs, served)
