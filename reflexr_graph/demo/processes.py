"""The processes the demo starts and always stops: a private Redis and worker subprocesses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reflexr_graph.local_redis import RedisServer

RUN_DIR = Path(".run")


@dataclass
class Worker:
    """One ``celery -A workers worker`` process, in its own process group so it can be killed whole."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the main process and its pool children: a machine dying mid-step."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (soft shutdown, as REMAP_SIGTERM=SIGQUIT makes it), then SIGKILL if it lingers."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Fleet:
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    def start_worker(self, name: str, concurrency: int = 2) -> Worker:
        log_path = RUN_DIR / f"{name}.log"
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers",
            "worker",
            "-P",
            "prefork",
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "-Q",
            self.env["REFLEXR_QUEUE"],
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "INFO",
        ]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        worker = Worker(name, proc, log_path)
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def worker_env(redis_url: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """The demo workers' environment: this one, minus any REFLEXR_* the user set, plus the demo's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLEXR_")}
    env.update({"REFLEXR_REDIS_URL": redis_url, "REMAP_SIGTERM": "SIGQUIT", **overrides})
    # The workers must import the deployable app (`workers`) from the project checkout.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH", "")]))
    return env


@contextlib.contextmanager
def private_redis() -> Iterator[RedisServer]:
    """The embedded default: a redis-server with AOF on, its data under .run/redis, on a free port."""
    server = RedisServer(appendonly=True, appendfsync="everysec", data_dir=RUN_DIR.resolve() / "redis")
    server.start()
    try:
        yield server
    finally:
        server.close()
