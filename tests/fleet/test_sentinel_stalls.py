"""The failover tests' topology under load: a sentinel whose event loop stalls (no CPU, a slow fsync
of its config) still has the old primary follow the new one well within the tests' wait.

A stall over 2 s puts a sentinel in TILT, where it acts on nothing, for 30 s by default, and it
demotes a primary that came back only on an INFO round (every 10 s by default): two such stalls
took the demotion past the 60 s that test_failover.py waits for it. tests/fleet/sentinel.py
lowers those timers (TIMERS).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.fleet.sentinel import SentinelTopology

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

STALL_S = 2.5
"""Over the sentinel's TILT trigger (2 s)."""
STALL_GAP_S = 28.0
"""The second stall comes while a default 30 s TILT would still last, and starts it again."""


@pytest.fixture
def topology() -> Iterator[SentinelTopology]:
    t = SentinelTopology()
    try:
        yield t.start()
    finally:
        t.close()


def _stall(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(STALL_S)  # the fault itself: a sentinel that gets no CPU for this long
    finally:
        os.kill(pid, signal.SIGCONT)


def _stall_twice_after_the_promotion(topology: SentinelTopology, done: threading.Event) -> None:
    assert topology.replica is not None
    promoted = topology.replica.port
    while topology.primary_port() != promoted and not done.wait(0.02):
        pass
    _stall(topology.sentinel_pid)
    if not done.wait(STALL_GAP_S):
        _stall(topology.sentinel_pid)


def test_a_partitioned_primary_is_demoted_although_the_sentinel_stalls(topology: SentinelTopology) -> None:
    done = threading.Event()
    stalls = threading.Thread(target=_stall_twice_after_the_promotion, args=(topology, done), daemon=True)
    stalls.start()
    try:
        topology.stall_primary()  # fails after 60 s unless the old primary follows the new one
    finally:
        done.set()
        stalls.join(STALL_S + 10)
