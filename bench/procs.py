"""The processes a benchmark starts, and always stops: one private Redis and worker subprocesses.

Each worker runs in its own session, so stopping it kills its whole process group (main
process and pool children) even when the benchmark fails or is interrupted; the group is
also what the recovery benchmark SIGKILLs. Logs go to a temp dir that is kept (and named)
only when something fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from bench.fleet_graph import REFS
from reflexr_graph import local_processes
from reflexr_graph.demo.processes import worker_env
from reflexr_graph.local_processes import Worker, celery_worker_argv, start_worker
from reflexr_graph.local_redis import RedisServer

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_S = 0.005
"""The poll of every wait the benchmarks time: the same for every path measured."""
T = TypeVar("T")


class BenchError(RuntimeError):
    pass


def wait_for(condition: Callable[[], T], timeout: float, what: str, poll_s: float = POLL_S) -> T:
    """local_processes.wait_for at the benchmarks' poll, failing as a BenchError."""
    value = local_processes.poll_until(condition, timeout, poll_s)
    if value is None:
        raise BenchError(local_processes.timed_out(timeout, what))
    return value


class Lab:
    """A private redis-server plus the workers started on it; :meth:`close` stops them all."""

    def __init__(self) -> None:
        self.redis = RedisServer(appendfsync="everysec")
        self.log_dir = Path(tempfile.mkdtemp(prefix="reflexr-bench-"))
        self.workers: list[Worker] = []
        self.failed = False

    @property
    def url(self) -> str:
        return self.redis.url

    def start_worker(
        self, app: str, queue: str, concurrency: int, env: Mapping[str, str] | None = None
    ) -> Worker:
        """``celery -A app worker`` on ``queue``; call :meth:`wait_ready` before using it."""
        name = f"{queue}-{uuid.uuid4().hex[:6]}"
        argv = celery_worker_argv(app, queue, name, concurrency=concurrency, loglevel="INFO")
        # Nothing runs when the benchmark stops a worker, so a long soft shutdown only waits.
        overrides = {"REFLEXR_QUEUE": queue, "REFLEXR_GRAPHS": REFS, "REFLEXR_SOFT_SHUTDOWN_TIMEOUT_S": "1"}
        overrides.update(env or {})
        worker = start_worker(name, argv, worker_env(self.url, overrides), self.log_dir / f"{name}.log")
        self.workers.append(worker)
        return worker

    def wait_ready(self, *workers: Worker) -> None:
        for w in workers:
            try:
                local_processes.wait_ready(w, READY_TIMEOUT_S)
            except (ChildProcessError, TimeoutError) as exc:
                raise BenchError(str(exc)) from None

    def stop_workers(self) -> None:
        """Stop every worker gently (SIGTERM, then SIGKILL of the group if it lingers).

        Gently, because a worker's reaper releases the reaper lock on shutdown: a SIGKILLed
        holder would leave it locked for up to 10 s and slow the next phase's recovery.
        """
        for w in self.workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for w in self.workers:  # all were signalled at once, so they stop in parallel
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            w.kill()  # the group: a worker that lingers, or pool children that outlived it
        self.workers.clear()

    def kill_workers(self) -> None:
        for w in self.workers:
            w.kill()
        self.workers.clear()

    def close(self) -> None:
        if self.failed:
            self.kill_workers()  # failing or interrupted: do not wait for anything
        self.stop_workers()
        self.redis.close()
        if self.failed:
            print(f"worker logs kept in {self.log_dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.log_dir, ignore_errors=True)


@contextlib.contextmanager
def lab() -> Iterator[Lab]:
    the_lab = Lab()
    try:
        the_lab.redis.start()
        yield the_lab
    except BaseException:
        the_lab.failed = True
        raise
    finally:
        the_lab.close()
