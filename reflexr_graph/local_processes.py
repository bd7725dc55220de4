"""The processes this machine starts for the demo, the benchmarks and the tests: free ports, the
environment of their children, waiting on a condition, and ``celery worker`` subprocesses.

Every worker runs in a session (process group) of its own, so stopping or killing it reaches its
pool children too, whatever state the caller left them in. Nothing here sleeps a fixed time:
waits poll a condition against a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.02
FLEET_READY_LINE = "ready: serves graphs"
"""What the fleet's worker logs once it consumes, also without ``-l`` (fleet/startup_log.py)."""
READY_LINES = (" ready.", FLEET_READY_LINE)
"""Celery's line at ``-l info``, and the fleet's own."""
KILL_WAIT_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller retries if it is taken since)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(overrides: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment unless given) without any ``REFLEXR_*`` the user set,
    plus ``overrides``: a child process sees only the settings its starter meant it to."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.upper().startswith("REFLEXR_")
    }
    env.update(overrides)
    return env


def poll_until(condition: Callable[[], T], timeout: float, poll_s: float = POLL_S) -> T | None:
    """Poll ``condition()`` until it returns something truthy, and return that; None at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(poll_s)


def timed_out(timeout: float, what: str) -> str:
    return f"timed out after {timeout:g}s waiting for {what}"


def wait_for(condition: Callable[[], T], timeout: float, what: str, poll_s: float = POLL_S) -> T:
    """:func:`poll_until`, raising TimeoutError naming ``what`` at the deadline."""
    value = poll_until(condition, timeout, poll_s)
    if value is None:
        raise TimeoutError(timed_out(timeout, what))
    return value


def celery_worker_argv(
    app: str, queue: str, name: str, *, concurrency: int = 1, pool: str = "prefork",
    loglevel: str | None = "info", command: Sequence[str] | None = None, chatty: bool = False,
) -> list[str]:  # fmt: skip
    """``celery -A app worker`` (or ``command``, e.g. ``python -m reflexr_graph worker``) on ``queue``,
    named ``name@%h``. Gossip, mingle and heartbeats are off unless ``chatty`` (as the deploy starts
    a worker): they only add broker traffic here."""
    head = list(command) if command is not None else [sys.executable, "-m", "celery", "-A", app, "worker"]
    return [
        *head, f"--pool={pool}", "-c", str(concurrency),
        *([] if chatty else ["--without-gossip", "--without-mingle", "--without-heartbeat"]),
        "-Q", queue, "-n", f"{name}@%h", *(["-l", loglevel] if loglevel else []),
    ]  # fmt: skip


def spawn(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, its output to ``log_path`` (else this process's)."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log_path.open("wb")) if log_path is not None else None
        return subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdout=out, stderr=subprocess.STDOUT if out else None,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


@dataclass
class Worker:
    """One worker process, in its own process group so it can be stopped or killed whole."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def ready(self) -> bool:
        """Its log says that it consumes."""
        log = self.log()
        return any(line in log for line in READY_LINES)

    def children(self) -> list[int]:
        """The pids of its pool children."""
        out = subprocess.run(["ps", "--ppid", str(self.pid), "-o", "pid="], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the main process only."""
        os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the main process and its pool children: a machine dying mid-step."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=KILL_WAIT_S)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the group (a soft shutdown with REMAP_SIGTERM=SIGQUIT), SIGKILL if it lingers."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def start_worker(
    name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path | None = None
) -> Worker:
    """A :class:`Worker` running ``argv`` (see :func:`celery_worker_argv`), its output in ``log_path``."""
    return Worker(name, spawn(argv, env, log_path, cwd), log_path)


def wait_ready(worker: Worker, timeout: float) -> None:
    """Until ``worker`` consumes; ChildProcessError with its log's tail if it exits first."""

    def ready() -> bool:
        if not worker.alive():
            raise ChildProcessError(f"worker {worker.name} exited at startup:\n{worker.log()[-3000:]}")
        return worker.ready()

    wait_for(ready, timeout, f"worker {worker.name} to be ready", poll_s=0.05)
