"""Fixtures for fleet tests: real ``celery -A workers worker`` subprocesses on a real Redis,
started by reflexr_graph/local_processes.py as the demo and the benchmarks start theirs.

Every worker runs in its own session (process group), so teardown kills it and its pool
children by group id whatever state the test left them in. Pool children are found with
``ps --ppid``. Waits poll a condition against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

from reflexr_graph import local_processes
from reflexr_graph.client import Client
from reflexr_graph.config.settings import Settings, load_settings
from reflexr_graph.model import RunEvent
from reflexr_graph.store import cluster, keys
from reflexr_graph.store.records import LATEST_CHECKPOINT
from reflexr_graph.store.redis_store import RedisStore
from tests import subprocesses
from tests.fleet import graphs
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 45.0
POLL_S = 0.05

T = TypeVar("T")

FAST_ENV = {
    "REFLEXR_LEASE_TTL_S": "3",
    "REFLEXR_MAX_ATTEMPTS": "3",
    "REFLEXR_RETRY_BACKOFF_S": "0.05",
    "REFLEXR_RETRY_BACKOFF_MAX_S": "0.2",
    "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S": "1",
}
"""Small TTLs and backoffs, so crash tests recover in seconds."""
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Debian's libfaketime (``make test`` installs it): preloaded, it shifts every clock of a process."""


def skewed_clock(offset_s: int) -> dict[str, str]:
    """The environment of a worker whose clocks run ``offset_s`` off the machine's (and Redis's):
    pass it to :meth:`Fleet.start`. Its pool children inherit it."""
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"{offset_s:+d}s"}


ENTRY_POINTS = {
    "celery": [sys.executable, "-m", "celery", "-A", "workers", "worker"],
    "reflexr-graph": [sys.executable, "-m", "reflexr_graph", "worker"],
}
"""The two ways to start a worker, which must behave the same."""
READY_LINE = local_processes.FLEET_READY_LINE


@dataclass
class Worker(local_processes.Worker):
    """One worker subprocess and its log (reflexr_graph/local_processes.py), with the waits crash
    tests need to reach into it."""

    def child(self) -> int:
        """The one pool child (workers started with ``-c 1``)."""
        return wait_for(lambda: self.children()[:1], 20, f"{self.name}'s pool child")[0]

    def wait_log(self, text: str, timeout: float = 30.0) -> None:
        wait_for(lambda: text in self.log(), timeout, f"{text!r} in {self.name}'s log")

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker {self.name} did not exit within {timeout:g}s\n{self.log()[-3000:]}")

    def kill_group(self) -> None:
        """SIGKILL the worker and its pool children."""
        self.kill()


@dataclass
class Fleet:
    """Starts workers against one Redis; :meth:`close` kills every one of them."""

    redis_url: str
    log_dir: Path
    queue: str
    env: dict[str, str] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)

    def settings(self, **overrides: Any) -> Settings:
        values = {k.removeprefix("REFLEXR_").lower(): v for k, v in {**FAST_ENV, **self.env}.items()}
        return load_settings(**{**values, "redis_url": self.redis_url, "queue": self.queue, **overrides})

    def worker_env(self, extra: dict[str, str]) -> dict[str, str]:
        return local_processes.environment({
            **FAST_ENV,
            "REFLEXR_REDIS_URL": self.redis_url,
            "REFLEXR_QUEUE": self.queue,
            "REFLEXR_GRAPHS": graphs.REFS,
            "REMAP_SIGTERM": "SIGQUIT",
            "PYTHONPATH": subprocesses.PYTHONPATH,
            **self.env,
            **extra,
        })  # fmt: skip

    def start(
        self, concurrency: int = 1, *, wait: bool = True, entry: str = "celery", pool: str = "prefork",
        loglevel: str | None = "info", remap: bool = True, chatty: bool = False, **env: str,
    ) -> Worker:  # fmt: skip
        """A worker started by ``entry`` (a key of :data:`ENTRY_POINTS`) with pool ``pool``, ``-l
        loglevel`` unless None, ``REMAP_SIGTERM=SIGQUIT`` in its environment unless not ``remap``, and
        without Celery's gossip, mingle and heartbeat unless ``chatty`` (as deploy/docker-entrypoint.sh
        starts it)."""
        name = f"w{len(self.workers) + 1}-{uuid.uuid4().hex[:6]}"
        argv = local_processes.celery_worker_argv(
            "workers", self.queue, name, concurrency=concurrency, pool=pool, loglevel=loglevel,
            command=ENTRY_POINTS[entry], chatty=chatty,
        )  # fmt: skip
        worker_env = self.worker_env(env)
        if not remap:
            del worker_env["REMAP_SIGTERM"]
        log_path = self.log_dir / f"{name}.log"
        worker = Worker(name, local_processes.spawn(argv, worker_env, log_path, ROOT), log_path)
        self.workers.append(worker)
        if wait:
            self.wait_ready(worker)
        return worker

    def wait_ready(self, worker: Worker) -> None:
        def ready() -> bool:
            if not worker.alive():
                pytest.fail(f"worker {worker.name} exited at startup:\n{worker.log()[-3000:]}")
            return worker.ready()

        wait_for(ready, READY_TIMEOUT_S, f"worker {worker.name} to be ready")

    def close(self) -> None:
        for worker in self.workers:
            worker.kill_group()

    def dump_logs(self) -> str:
        return "\n".join(f"===== {w.name}\n{w.log()[-6000:]}" for w in self.workers)


@contextlib.contextmanager
def closing_fleet(f: Fleet, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """``f``, closed afterwards; its workers' logs printed when the test body failed."""
    try:
        yield f
    finally:
        f.close()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f.dump_logs())


@pytest.fixture
def fleet(redis_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    with closing_fleet(Fleet(redis_url, tmp_path, queue=f"fleet-{uuid.uuid4().hex[:8]}"), request) as f:
        yield f


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # Lets the fleet fixture print the workers' logs when the test body failed.
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]


@pytest.fixture
def client_for() -> Iterator[Callable[[Fleet], Client]]:
    clients: list[Client] = []

    def make(f: Fleet) -> Client:
        c = Client(f.settings())
        clients.append(c)
        return c

    try:
        yield make
    finally:
        for c in clients:
            c.close()


# -- reading what happened ---------------------------------------------------------------------


def executions(r: redis.Redis, run_id: str) -> list[str]:
    """``node:attempt`` for every step execution of the run, in order."""
    return [v.decode() for v in r.lrange(graphs.exec_key(run_id), 0, -1)]


def count(r: redis.Redis, run_id: str, node: str) -> int:
    return sum(1 for e in executions(r, run_id) if e.split(":")[0] == node)


def events(store: RedisStore, run_id: str, kind: str | None = None) -> list[RunEvent]:
    return [e for e in store.events(run_id) if kind is None or e.type == kind]


def open_gate(r: redis.Redis, run_id: str, attempt: int | None = None) -> None:
    r.rpush(graphs.gate_key(run_id, attempt), b"open")


def assert_consistent(r: redis.Redis, run_id: str) -> None:
    """The run is in exactly the status index its record names (queued and retrying runs are listed
    from the due set, running ones from the leases: keys.status_index); a terminal run holds no
    lease or due entry."""
    status = r.hget(keys.run(run_id), "status")
    assert status is not None
    status_s = status.decode()
    shard = cluster.shards(r).of(run_id)  # a standalone store's or a cluster's (tests/cluster)
    members = [s.value for s in keys.STATUS_ORDER if r.zscore(keys.status_set(s, shard), run_id) is not None]
    assert members == ([] if status_s in ("queued", "retrying", "running") else [status_s])
    assert r.zscore(keys.status_index(status_s, shard), run_id) is not None
    if status_s in ("succeeded", "dead", "cancelled"):
        assert r.zscore(keys.leases(shard), run_id) is None
        assert r.zscore(keys.due(shard), run_id) is None
    latest = r.hget(keys.run(run_id), LATEST_CHECKPOINT)
    ckpt = r.hget(keys.ckpt(run_id), latest) if latest else None
    if ckpt is not None:
        assert isinstance(json.loads(ckpt), dict)
