"""The one clock on the store's time (reflexr_graph/clock.py): sampled from Redis's TIME by the store,
carried on the monotonic clock, the wall clock before the first sample, overridden by a test's source.

A process whose clocks are off runs under libfaketime, its wall clock stepped mid-way through a
timestamp file, as NTP or a laptop's sleep steps it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from reflexr_graph import clock
from reflexr_graph.store.aio import AsyncStore
from reflexr_graph.store.redis_store import RedisStore
from reflexr_graph.store.workers import live_workers
from tests.fleet.conftest import FAKETIME_LIB
from tests.subprocesses import ROOT


@pytest.fixture
def fresh_clock() -> Iterator[None]:
    """No sample before the test; none left after it (the next store call samples again)."""
    clock.forget()
    try:
        yield
    finally:
        clock.forget()


def redis_s(url: str) -> float:
    with redis.Redis.from_url(url) as r:
        seconds, micros = r.time()
    return int(seconds) + int(micros) / 1e6


def test_before_any_sample_the_clock_is_the_wall_clock(fresh_clock: None) -> None:
    before = time.time()
    now = clock.now()
    assert before <= now <= time.time()
    assert clock.due() and clock.skew_ms() is None and clock.last_sample() is None


def test_a_sample_is_carried_on_the_monotonic_clock(fresh_clock: None) -> None:
    # As a process whose wall clock is two minutes ahead of the store's would read it.
    sample = clock.probe().record(time.time() * 1000 - 120_000)
    now, mono = clock.now(), time.monotonic()
    assert now == pytest.approx(sample.server_ms / 1000 + (mono - sample.at), abs=0.002)
    assert now == pytest.approx(time.time() - 120, abs=0.05)
    assert clock.skew_ms() == pytest.approx(120_000, abs=50)
    assert not clock.due(), "sampled: the next is RESAMPLE_S away"


def test_a_test_source_overrides_the_store_time(fresh_clock: None, redis_url: str) -> None:
    store = RedisStore.from_url(redis_url)
    try:
        previous = clock.set_source(lambda: 5.0)
        try:
            assert (clock.now(), clock.now_ms()) == (5.0, 5000)
            assert not clock.due(), "no sample is taken while a test's source is set"
            store.live_workers()
            assert clock.last_sample() is None and clock.now() == 5.0
        finally:
            clock.set_source(previous)
        store.live_workers()  # restored: the store's time, sampled at the first call
        assert clock.last_sample() is not None
        assert clock.now() == pytest.approx(redis_s(redis_url), abs=0.05)
    finally:
        store.close()


def test_a_store_samples_before_its_first_call_and_a_dead_one_is_not_retried_at_once(
    fresh_clock: None, redis_url: str
) -> None:
    store = RedisStore.from_url(redis_url)
    try:
        assert store.live_workers() == []
        sample = clock.last_sample()
        assert sample is not None and abs(sample.skew_ms) < 50 and sample.round_trip_ms < 1000
    finally:
        store.close()
    clock.forget()
    dead = RedisStore.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    try:
        assert dead.sample_clock() is None
        assert clock.last_sample() is None and not clock.due(), "tried again after RETRY_S"
    finally:
        dead.close()


def test_an_async_store_samples_before_its_first_operation(fresh_clock: None, redis_url: str) -> None:
    async def main() -> None:
        store = AsyncStore.from_url(redis_url)
        try:
            assert await store.do(live_workers()) == []
        finally:
            await store.close()

    asyncio.run(main())
    assert clock.last_sample() is not None


PROBE = """
import json, pathlib, sys, time
from reflexr_graph import clock
from reflexr_graph.store.redis_store import RedisStore

url, stamp = sys.argv[1], pathlib.Path(sys.argv[2])
store = RedisStore.from_url(url)
seen = {"unsampled": clock.now()}
store.live_workers()  # the first call samples the store's time
seen["sampled"], seen["skew_ms"] = clock.now(), clock.skew_ms()
stamp.write_text("+3720s")  # the wall clock steps an hour further ahead
seen["wall_stepped"], seen["after_step"] = time.time(), clock.now()
print(json.dumps(seen))
"""


def test_a_skewed_process_keeps_the_store_time_through_a_wall_clock_step(
    redis_url: str, tmp_path: Path
) -> None:
    stamp = tmp_path / "faketime"
    stamp.write_text("+120s")
    env = {
        "LD_PRELOAD": FAKETIME_LIB,
        "FAKETIME_TIMESTAMP_FILE": str(stamp),
        "FAKETIME_NO_CACHE": "1",  # read the file at every call: the step shows at once
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # a wall clock step leaves the monotonic clock be
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, redis_url, str(stamp)],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    store_now = redis_s(redis_url)
    assert seen["unsampled"] == pytest.approx(store_now + 120, abs=5), "the wall clock before a sample"
    assert seen["skew_ms"] == pytest.approx(120_000, abs=1000)
    assert seen["sampled"] == pytest.approx(store_now, abs=5)
    assert seen["wall_stepped"] == pytest.approx(store_now + 3720, abs=5), "the step took effect"
    assert seen["after_step"] - seen["sampled"] < 1, "the step changed nothing"
